"""Table DDL handlers of the table API: create, list, describe, update and delete tables, and split points.

One method per action (CreateTable, ListTable, DescribeTable, UpdateTable, DeleteTable,
ComputeSplitPointsBySize); :class:`~.api.TableApi` routes the wire paths to them.
"""

from __future__ import annotations

import logging
from typing import Any

from google.protobuf.message import Message

from airflow_tablestore.emulator.api_common import (
    BAD_PK_TYPES,
    COL_TYPE_IDS,
    COL_TYPES,
    INT64_MAX,
    MAX_CU,
    MAX_TABLES,
    PK_TYPE_IDS,
    PK_TYPES,
    check_name,
    parse,
    set_consumed,
    table_or_error,
)
from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.codec.encode import encode_primary_key
from airflow_tablestore.emulator.errors import EmulatorError, parameter_invalid, table_not_found
from airflow_tablestore.emulator.store.database import Store
from airflow_tablestore.emulator.store.keys import decode_key
from airflow_tablestore.emulator.store.model import TableInfo
from airflow_tablestore.protocol import ots_table_pb2 as _pb

pb: Any = _pb  # generated module without type stubs

log = logging.getLogger(__name__)

SPLIT_UNIT_BYTES = 100 * 1024 * 1024
"""ComputeSplitPointsBySize's default ``split_size_unit_in_byte`` (the proto's "in 100MB")."""


class DdlHandlers:
    """Table DDL on top of a :class:`Store` (validation per ``table-api-proto.md`` §3.1-3.5, §5.1)."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def _table(self, name: str) -> TableInfo:
        return table_or_error(self.store, name)

    def create_table(self, body: bytes) -> Message:
        req = parse(pb.CreateTableRequest, body)
        tm = req.table_meta
        check_name(tm.table_name, "table")
        if not 1 <= len(tm.primary_key) <= 4:
            raise parameter_invalid("The number of primary key columns must be in range: [1, 4].")
        pk: list[list[Any]] = []
        seen: set[str] = set()
        for i, p in enumerate(tm.primary_key):
            check_name(p.name)
            if p.type in BAD_PK_TYPES:
                raise parameter_invalid(f"{BAD_PK_TYPES[p.type]} is an invalid type for the primary key.")
            if p.type not in PK_TYPES:
                raise parameter_invalid(f"Invalid primary key type: {p.type}.")
            if p.name in seen:
                raise parameter_invalid(f"Duplicated primary key name: '{p.name}'.")
            seen.add(p.name)
            auto = p.HasField("option") and p.option == pb.AUTO_INCREMENT
            if auto:
                if i == 0:
                    raise parameter_invalid("The first primary key column cannot be auto increment.")
                if p.type != 1:
                    raise parameter_invalid("Auto increment primary key column must be INTEGER.")
                if any(x[2] for x in pk):
                    raise parameter_invalid("Only one primary key column can be auto increment.")
            pk.append([p.name, PK_TYPES[p.type], auto])
        if len(tm.defined_column) > 32:
            raise parameter_invalid("The number of defined columns must be in range: [0, 32].")
        defined = []
        for d in tm.defined_column:
            check_name(d.name)
            if d.name in seen:
                raise parameter_invalid(
                    f"Duplicated attribute column name with primary key column: '{d.name}'.")
            if d.type not in COL_TYPES:
                raise parameter_invalid(f"Invalid defined column type: {d.type}.")
            defined.append([d.name, COL_TYPES[d.type]])
        if len(req.index_metas):
            raise parameter_invalid("Secondary indexes are not supported by the emulator.")
        opts = req.table_options
        if not req.HasField("table_options") or not opts.HasField("time_to_live"):
            raise parameter_invalid("Time-to-live is missing while creating table.")
        if not opts.HasField("max_versions"):
            raise parameter_invalid("MaxVersions is missing while creating table.")
        options = {
            "ttl": opts.time_to_live,
            "max_versions": opts.max_versions,
            "deviation": (opts.deviation_cell_version_in_sec
                          if opts.HasField("deviation_cell_version_in_sec") else 86400),
            "allow_update": opts.allow_update if opts.HasField("allow_update") else True,
        }
        self._check_options(options)
        read, write = self._check_cu(req.reserved_throughput.capacity_unit, 0, 0)
        now_s = self.clock.now_s()
        meta: dict[str, Any] = {
            "name": tm.table_name, "pk": pk, "defined": defined, "options": options,
            "reserved": [read, write],
            "created_s": now_s, "last_increase": int(now_s), "last_decrease": None,
            "stream": (self._stream_spec(req.stream_spec) if req.HasField("stream_spec")
                       else {"enabled": False}),
        }
        if tm.table_name in self.store.tables.names():
            raise EmulatorError("OTSObjectAlreadyExist", "Requested table already exists.", 409)
        if len(self.store.tables.names()) >= MAX_TABLES:
            raise EmulatorError("OTSQuotaExhausted", "Number of tables exceeded the quota.", 403)
        try:
            self.store.tables.create(meta)
        except KeyError:
            raise EmulatorError("OTSObjectAlreadyExist", "Requested table already exists.", 409) from None
        log.info("created table %s", tm.table_name)
        return pb.CreateTableResponse()

    @staticmethod
    def _check_options(o: dict[str, Any]) -> None:
        if o["ttl"] == 0 or o["ttl"] < -1:
            raise parameter_invalid("TimeToLive cannot be 0 or less than -1.")
        if 0 < o["ttl"] < 86400:
            raise parameter_invalid("TimeToLive must be -1 or at least 86400 seconds.")
        if o["max_versions"] <= 0:
            raise parameter_invalid("The maximum versions cannot be less than or equal to 0.")
        if not 0 <= o["deviation"] <= INT64_MAX // 1000000:
            raise parameter_invalid("The maximum deviation must be in range [0, INT64_MAX/1000000].")

    @staticmethod
    def _check_cu(c: Any, read: int, write: int) -> tuple[int, int]:
        if c.HasField("read"):
            read = c.read
        if c.HasField("write"):
            write = c.write
        for v in (read, write):
            if not 0 <= v <= MAX_CU:
                raise parameter_invalid(f"Invalid Capacity Unit:{v}. Capacity Unit must be nonnegative.")
        return read, write

    def _stream_spec(self, spec: Any) -> dict[str, Any]:
        if spec.enable_stream:
            if not spec.HasField("expiration_time"):
                raise parameter_invalid("Expiration time of stream must be specified when enabling stream.")
            limit = int(self.store.stream.default_retention_hours)  # --stream-retention-hours (service: 168)
            if not 1 <= spec.expiration_time <= limit:
                raise parameter_invalid(f"Expiration time of stream must be in range: [1, {limit}] hours.")
            return {"enabled": True, "expiration": spec.expiration_time}
        if spec.HasField("expiration_time"):
            raise parameter_invalid("Expiration time of stream cannot be specified when disabling stream.")
        return {"enabled": False}

    def list_table(self, body: bytes) -> Message:
        parse(pb.ListTableRequest, body)
        resp = pb.ListTableResponse()
        resp.table_names.extend(self.store.tables.names())
        return resp

    def delete_table(self, body: bytes) -> Message:
        req = parse(pb.DeleteTableRequest, body)
        self._table(req.table_name)
        try:
            self.store.tables.delete(req.table_name)
        except KeyError:
            raise table_not_found() from None
        log.info("deleted table %s", req.table_name)
        return pb.DeleteTableResponse()

    def _fill_common(self, info: TableInfo, rtd: Any, opts: Any, sd: Any) -> None:
        rtd.capacity_unit.read = info.reserved_read
        rtd.capacity_unit.write = info.reserved_write
        rtd.last_increase_time = info.last_increase_s
        if info.last_decrease_s is not None:
            rtd.last_decrease_time = info.last_decrease_s
        opts.time_to_live = info.time_to_live
        opts.max_versions = info.max_versions
        opts.deviation_cell_version_in_sec = info.deviation_s
        opts.allow_update = info.allow_update
        sd.enable_stream = info.stream_enabled
        if info.stream_enabled:
            sd.stream_id = info.stream_id or ""
            sd.expiration_time = max(1, int(info.stream_expiration_hours))
            sd.last_enable_time = info.stream_enabled_us

    def describe_table(self, body: bytes) -> Message:
        req = parse(pb.DescribeTableRequest, body)
        info = self._table(req.table_name)
        resp = pb.DescribeTableResponse()
        resp.table_meta.table_name = info.name
        for name, t in info.pk:
            p = resp.table_meta.primary_key.add(name=name, type=PK_TYPE_IDS[t])
            if info.auto_increment == name:
                p.option = pb.AUTO_INCREMENT
        for name, t in info.defined_columns:
            resp.table_meta.defined_column.add(name=name, type=COL_TYPE_IDS[t])
        self._fill_common(info, resp.reserved_throughput_details, resp.table_options, resp.stream_details)
        resp.table_status = pb.ACTIVE
        return resp

    def update_table(self, body: bytes) -> Message:
        req = parse(pb.UpdateTableRequest, body)
        with self.store.db.write():
            info = self._table(req.table_name)
            meta = dict(info.raw)
            meta["options"] = dict(meta["options"])
            if req.HasField("table_options"):
                o = req.table_options
                fields = {"time_to_live": "ttl", "max_versions": "max_versions",
                          "deviation_cell_version_in_sec": "deviation", "allow_update": "allow_update"}
                present = [f for f in fields if o.HasField(f)]
                if not present:
                    raise parameter_invalid("No parameter is specified in table options.")
                for f in present:
                    meta["options"][fields[f]] = getattr(o, f)
                self._check_options(meta["options"])
            if req.HasField("reserved_throughput"):
                old = tuple(meta["reserved"])
                read, write = self._check_cu(req.reserved_throughput.capacity_unit, *old)
                meta["reserved"] = [read, write]
                now = int(self.clock.now_s())
                if read > old[0] or write > old[1]:
                    meta["last_increase"] = now
                if read < old[0] or write < old[1]:
                    meta["last_decrease"] = now
            if req.HasField("stream_spec"):
                spec = self._stream_spec(req.stream_spec)
                old_stream = meta.get("stream") or {}
                if spec["enabled"] and old_stream.get("enabled"):
                    meta["stream"] = dict(old_stream, expiration=spec["expiration"])
                else:
                    meta["stream"] = spec
            info = self.store.tables.update_meta(req.table_name, meta)
        resp = pb.UpdateTableResponse()
        self._fill_common(info, resp.reserved_throughput_details, resp.table_options, resp.stream_details)
        return resp

    def compute_split_points_by_size(self, body: bytes) -> Message:
        """Split points every ``split_size × unit`` bytes of stored rows, on first-PK-column values.

        The service splits on partition keys (the first primary-key column), so each split point is a
        one-column PK prefix: strictly ascending, never the first row's value (no empty leading range), at
        most ``split_point_limit`` of them. One location (``""``) covers every range.
        """
        req = parse(pb.ComputeSplitPointsBySizeRequest, body)
        info = self._table(req.table_name)
        if req.split_size <= 0:
            raise parameter_invalid("Split size must be greater than 0.")
        unit = req.split_size_unit_in_byte if req.HasField("split_size_unit_in_byte") else SPLIT_UNIT_BYTES
        if unit <= 0:
            raise parameter_invalid("Split size unit must be greater than 0.")
        limit = req.split_point_limit if req.HasField("split_point_limit") else None
        if limit is not None and limit <= 0:
            raise parameter_invalid("Split point limit must be greater than 0.")
        resp = pb.ComputeSplitPointsBySizeResponse()
        set_consumed(resp.consumed, 1, 0)
        for name, t in info.pk:
            resp.schema.add(name=name, type=PK_TYPE_IDS[t])
        first_name, first_type = info.pk[0]
        for prefix in self._split_prefixes(info.table_id, first_type, req.split_size * unit, limit):
            value = decode_key(prefix, [first_type])[0]
            resp.split_points.append(encode_primary_key([(first_name, value)]))
        resp.locations.add(location="", repeat=len(resp.split_points) + 1)
        return resp

    def _split_prefixes(self, table_id: int, first_type: str, split_bytes: int, limit: int | None) -> list[bytes]:
        """The encoded first-column keys (:mod:`~..store.keys`) where a new split starts.

        Streams ``(key, stored size)`` in key order; a row's size is its stored key and cell blob lengths
        (SQLite reads blob lengths without loading the blobs). Once a split holds ``split_bytes``, the next
        row with a new first-column value starts the next one.
        """
        prefixes: list[bytes] = []
        current = b""  # the previous row's encoded first column
        size = 0
        fixed_length = 9 if first_type == "INTEGER" else 0
        with self.store.db.reader() as conn:
            cursor = conn.execute(
                "SELECT key, length(key) + length(data) FROM rows WHERE tid=? ORDER BY key", (table_id,))
            for key, row_size in cursor:
                # INTEGER: marker + 8 bytes; else up to the 00 01 terminator (00 bytes are escaped as 00 FF)
                prefix = key[:fixed_length or key.index(b"\x00\x01", 1) + 2]
                if prefix != current:
                    if size >= split_bytes:
                        prefixes.append(prefix)
                        size = 0
                        if limit is not None and len(prefixes) >= limit:
                            break
                    current = prefix
                size += row_size
        return prefixes
