"""``Rows``: the one batch type of table rows (a GetRange page), kept as its PlainBuffer bytes until used."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from airflow_tablestore.client.model import Row
from airflow_tablestore.client.plainbuffer.decode import decode_rows


class Rows(Sequence[Row]):
    """A page of table rows: ``data`` holds their PlainBuffer message (``b""`` for none), decoded to
    :class:`~airflow_tablestore.client.model.Row` tuples on first use (iterating, indexing, ``len``, :meth:`decode`;
    corrupt bytes raise :class:`~airflow_tablestore.client.errors.PlainBufferError` then). The Spark data source
    turns it straight into Arrow without decoding (``spark/arrow/values.py``'s ``RowsToArrow.page``)."""

    __slots__ = ("data", "_decoded")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._decoded: list[Row] | None = None

    def decode(self) -> list[Row]:
        """The rows (decoded once, then kept)."""
        if self._decoded is None:
            self._decoded = decode_rows(self.data) if self.data else []
        return self._decoded

    def __len__(self) -> int:
        return len(self.decode())

    def __iter__(self) -> Iterator[Row]:
        return iter(self.decode())

    @overload
    def __getitem__(self, index: int) -> Row: ...

    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...

    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        return self.decode()[index]

    def __repr__(self) -> str:
        state = f"{len(self._decoded)} rows" if self._decoded is not None else "not decoded"
        return f"Rows({len(self.data)} bytes, {state})"
