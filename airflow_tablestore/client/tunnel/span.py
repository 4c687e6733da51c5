"""Repeatable reads of a tunnel channel: a *span* is "at most N records after a position, before a time".

A ReadRecords answer is not repeatable by itself: at the head of a stream channel the same token later returns
more records. A span is: from a :class:`Position` (a token and how many records after it to skip), take records
in channel order, stopping at ``limit`` records, at the first record whose sequence timestamp is at or past
``until_us`` (stream records; base data has none), at the end of the channel, or at the head of the log. Read
again later it yields the same records, provided that every change committed before ``until_us`` is already in
the log when the span is first read (hence ``until_us`` is chosen a moment in the past). Its end position is
known only after the read (:class:`SpanEnd`); a token can stand for several equal positions (``(t, 3)`` before
more records arrive at the head, ``(next, 0)`` after), all of which begin the same next span.

The Spark streaming source plans spans on the driver and reads them on the executors
(:mod:`airflow_tablestore.spark.stream`). A read yields :class:`~airflow_tablestore.client.records.Records`
batches: every answer is checked as it arrives and its sequence timestamps are read without decoding it (in C
where the compiled decoder is in use), so readers that build Arrow straight from the bytes never decode a record.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from airflow_tablestore.client.records import Records
from airflow_tablestore.client.tunnel.reads import FINISHED, enough_data


@dataclass(frozen=True)
class Position:
    """The records of a channel after ``token``, less the first ``skip`` of them (``FINISHED``: none left)."""

    token: str
    skip: int = 0

    @property
    def finished(self) -> bool:
        return self.token == FINISHED

    def as_dict(self) -> dict[str, Any]:
        return {"token": self.token, "skip": self.skip}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Position:
        return cls(str(data["token"]), int(data.get("skip", 0)))


@dataclass(frozen=True)
class Span:
    """At most ``limit`` records after ``start``, before the first one at or past ``until_us`` (µs; None: no
    time bound). ``stream``: the channel is a stream channel (its head moves; an answer that is not "enough
    data" means the read caught up)."""

    start: Position
    limit: int
    until_us: int | None = None
    stream: bool = False

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"token": self.start.token, "skip": self.start.skip, "limit": self.limit,
                                "stream": self.stream}
        if self.until_us is not None:
            data["until_us"] = self.until_us
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Span:
        until = data.get("until_us")
        return cls(Position(str(data["token"]), int(data.get("skip", 0))), int(data["limit"]),
                   None if until is None else int(until), bool(data.get("stream", False)))

    def key(self, channel_id: str) -> str:
        """A stable name for this span of ``channel_id`` (where its end position is stored)."""
        text = json.dumps({"channel": channel_id, **self.as_dict()}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class SpanEnd:
    """Where a span ended: the next span starts at ``position``.

    ``caught_up``: the read reached the head of the channel's log; ``reached_until``: it met a record at or past
    ``until_us``. Either way no record before ``until_us`` is left before ``position``."""

    position: Position
    records: int
    caught_up: bool = False
    reached_until: bool = False

    @property
    def finished(self) -> bool:
        return self.position.finished

    def as_dict(self) -> dict[str, Any]:
        return {**self.position.as_dict(), "records": self.records, "caught_up": self.caught_up,
                "reached_until": self.reached_until}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpanEnd:
        return cls(Position.from_dict(data), int(data["records"]), bool(data["caught_up"]),
                   bool(data["reached_until"]))


class SpanRead:
    """Iterate to get the span's records answer by answer; then :attr:`end` says where it ended.

    ``client`` is a :class:`~airflow_tablestore.client.tunnel.client.TunnelClient` (transient errors are
    retried there; anything it raises propagates).

    ``whole_answers``: never stop inside an answer — ``limit``, ``until_us`` and ``max_bytes`` end the read
    *after* the answer that reaches them, so the end is always a token (``skip`` 0), which is what a checkpoint
    can hold (the replication consumer's rounds). Such a read is not repeatable at the head of a stream."""

    def __init__(self, client: Any, tunnel_id: str, client_id: str, channel_id: str, span: Span, *,
                 whole_answers: bool = False, max_bytes: int | None = None, settle_us: int = 0) -> None:
        self.client = client
        self.settle_us = settle_us
        self.tunnel_id = tunnel_id
        self.client_id = client_id
        self.channel_id = channel_id
        self.span = span
        self.whole_answers = whole_answers
        self.max_bytes = max_bytes
        self.end: SpanEnd | None = None
        self.reads = 0
        self.bytes = 0

    def __iter__(self) -> Iterator[Records]:
        """Each answer's usable records, as a slice of the answer's :class:`Records` (not decoded)."""
        span = self.span
        token, skip = span.start.token, span.start.skip
        taken = 0
        if token == FINISHED or span.limit <= 0:
            self.end = SpanEnd(span.start, 0)
            return
        until = span.until_us
        if until is not None and self.settle_us:
            # the log is complete up to ``until`` once ``settle_us`` have passed: only then is the span repeatable
            wait_us = until + self.settle_us - time.time_ns() // 1000
            if wait_us > 0:
                time.sleep(wait_us / 1e6)
        while True:
            result = self.client.read_records(self.tunnel_id, self.client_id, self.channel_id, token)
            # checks the whole answer (raising as decoding it would, before it counts) without decoding it
            first, _ = result.records.scan(until, min(skip, len(result.records)))
            self.reads += 1
            self.bytes += result.size_bytes
            records = result.records
            skipped_here = min(skip, len(records))
            usable = records[skipped_here:]
            skip -= skipped_here  # > 0 only when this answer was shorter than an earlier one at the same token
            cut = len(usable)
            reached = False
            if first < len(records):
                cut, reached = first - skipped_here, True
            if self.whole_answers:
                cut = len(usable)
            elif taken + cut > span.limit:
                cut, reached = span.limit - taken, False
            if cut:
                yield usable[:cut] if cut < len(usable) else usable
                taken += cut
            if cut < len(usable):  # stopped inside this answer: the position stays on its token
                self.end = SpanEnd(Position(token, skipped_here + cut), taken, reached_until=reached)
                return
            previous, token = token, result.next_token
            if token == FINISHED:
                self.end = SpanEnd(Position(FINISHED), taken)
                return
            over_bytes = self.max_bytes is not None and self.bytes >= self.max_bytes
            if reached or taken >= span.limit or over_bytes:
                self.end = SpanEnd(Position(token, skip), taken, reached_until=reached)
                return
            if span.stream:
                if not records or not enough_data(result):
                    self.end = SpanEnd(Position(token, skip), taken, caught_up=True)
                    return
            elif not records and token == previous:  # defensive: a base channel that stopped moving
                self.end = SpanEnd(Position(token, skip), taken, caught_up=True)
                return


def drain(read: SpanRead) -> SpanEnd:
    """Read a span to its end without keeping its records (to find where an unread span ends)."""
    for _ in read:
        pass
    assert read.end is not None
    return read.end
