"""ReadRecords answers assembled as bytes equal the generated module's serialization of the same response."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_tablestore.emulator.codec.format import HEADER
from airflow_tablestore.emulator.tunnel.answer import RecordEntries
from airflow_tablestore.protocol import ots_tunnel_pb2

pb: Any = ots_tunnel_pb2

SIZES = [0, 1, 100, 122, 123, 127, 128, 129, 16379, 16383, 16384, 2 * 1024 * 1024 + 17]
RECORDS = [(action, bytes([size % 251]) * size) for size in SIZES for action in (1, 2, 3)]


def _fill(entries: RecordEntries, way: str, headed: bool) -> None:
    if way == "add":
        for action, data in RECORDS:
            entries.add(action, data, headed=headed)
    elif way == "extend":
        for action, data in RECORDS:
            entries.extend(action, [data], headed=headed)
    else:
        entries.extend_mixed([a for a, _ in RECORDS], [d for _, d in RECORDS])


@pytest.mark.parametrize(("way", "headed"), [("add", True), ("add", False), ("extend", True),
                                              ("extend", False), ("mixed", True)])
@pytest.mark.parametrize(("token", "more"), [("finished", False), ("a-next-token", True), ("", True)])
def test_assembled_answer_is_the_canonical_serialization(way: str, headed: bool, token: str, more: bool) -> None:
    entries = RecordEntries()
    _fill(entries, way, headed)
    expected = pb.ReadRecordsResponse(next_token=token, may_more_record=more)
    for action, data in RECORDS:
        expected.records.add(action_type=action, record=data if headed else HEADER + data)
    got = entries.response(token, more)
    assert got == expected.SerializeToString()
    assert entries.nbytes == sum(len(r.record) for r in expected.records)
    assert pb.ReadRecordsResponse.FromString(got) == expected


@pytest.mark.parametrize("headed", [True, False])
def test_extend_of_many_records_of_one_action(headed: bool) -> None:
    bodies = [bytes([i % 7]) * (i * 37 % 300) for i in range(1000)]
    entries = RecordEntries()
    entries.extend(1, bodies, headed=headed)
    expected = pb.ReadRecordsResponse(next_token="t", may_more_record=True)
    for body in bodies:
        expected.records.add(action_type=1, record=body if headed else HEADER + body)
    assert entries.response("t", True) == expected.SerializeToString()


def test_empty_answer() -> None:
    assert RecordEntries().response("finished", False) == pb.ReadRecordsResponse(
        next_token="finished", may_more_record=False).SerializeToString()
