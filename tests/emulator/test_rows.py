"""Single-row operations: PutRow/GetRow/UpdateRow/DeleteRow semantics, conditions, versions, TTL, filters."""

from __future__ import annotations

import time
from typing import Any

import pytest
from emu_wire import (
    Wire,
    WireError,
    composite,
    create_table,
    delete,
    get,
    pb,
    put,
    single_filter,
    unique,
    update,
)

from airflow_tablestore.emulator.codec.decode import decode_row
from airflow_tablestore.emulator.codec.encode import encode_primary_key, encode_row
from airflow_tablestore.emulator.codec.format import (
    AUTO_INCREMENT,
    OP_DELETE_ALL,
    OP_DELETE_ONE,
    OP_INCREMENT,
    PBRow,
)
from airflow_tablestore.emulator.testing import EmulatorProcess

PK = [("pk", 1)]


def cols(row: PBRow | None) -> dict[str, list[tuple[int, Any]]]:
    assert row is not None
    out: dict[str, list[tuple[int, Any]]] = {}
    for c in row.cells:
        assert c.op is None and c.ts is not None  # responses: value + timestamp, never an op
        out.setdefault(c.name, []).append((c.ts, c.value))
    return out


def test_put_get_roundtrip_all_types(wire: Wire, table: str) -> None:
    values = {"i": -5, "d": 1.5, "b": True, "s": "héllo", "bin": b"\x00\xff", "empty": ""}
    put(wire, table, PK, values)
    row = get(wire, table, PK)
    assert row is not None and row.pk == PK
    assert {k: v[0][1] for k, v in cols(row).items()} == values
    assert [c.name for c in row.cells] == sorted(values)


def test_missing_row_returns_empty_row_field(wire: Wire, table: str) -> None:
    req = pb.GetRowRequest(table_name=table, primary_key=encode_primary_key([("pk", 404)]), max_versions=1)
    resp = wire.call("GetRow", req)
    assert resp.HasField("row") and resp.row == b""
    assert resp.consumed.capacity_unit.HasField("read") and resp.consumed.capacity_unit.HasField("write")


def test_put_replaces_whole_row(wire: Wire, table: str) -> None:
    put(wire, table, PK, {"a": 1, "b": 2})
    put(wire, table, PK, {"c": 3})
    assert set(cols(get(wire, table, PK))) == {"c"}


def test_row_existence_conditions(wire: Wire, table: str) -> None:
    with pytest.raises(WireError) as e:
        put(wire, table, PK, {"a": 1}, existence=1)
    assert (e.value.status, e.value.code, e.value.message) == (403, "OTSConditionCheckFail", "Condition check failed.")
    assert get(wire, table, PK) is None
    put(wire, table, PK, {"a": 1}, existence=2)
    with pytest.raises(WireError, match="Condition check failed"):
        put(wire, table, PK, {"a": 2}, existence=2)
    with pytest.raises(WireError, match="Condition check failed"):
        delete(wire, table, PK, existence=2)
    assert cols(get(wire, table, PK))["a"][0][1] == 1
    delete(wire, table, PK, existence=1)
    assert get(wire, table, PK) is None
    delete(wire, table, PK)  # IGNORE on an absent row is fine
    with pytest.raises(WireError, match="Condition check failed"):
        delete(wire, table, PK, existence=1)


def test_column_conditions(wire: Wire, table: str) -> None:
    put(wire, table, PK, {"n": 5, "s": "x"})
    with pytest.raises(WireError, match="Condition check failed"):
        put(wire, table, PK, {"n": 6}, condition=single_filter("n", 3, 10))  # n > 10 fails
    put(wire, table, PK, {"n": 6}, condition=single_filter("n", 1, 5))
    assert cols(get(wire, table, PK))["n"][0][1] == 6
    # missing column: pass_if_missing decides
    put(wire, table, PK, {"n": 7}, condition=single_filter("missing", 1, 1, pass_if_missing=True))
    with pytest.raises(WireError, match="Condition check failed"):
        put(wire, table, PK, {"n": 8}, condition=single_filter("missing", 1, 1, pass_if_missing=False))
    both = composite(2, single_filter("n", 1, 7), single_filter("n", 6, 100))
    update(wire, table, PK, [("m", 1, None, None)], condition=both)
    either = composite(3, single_filter("n", 1, 0), single_filter("n", 1, 1))
    with pytest.raises(WireError, match="Condition check failed"):
        update(wire, table, PK, [("m", 2, None, None)], condition=either)
    with pytest.raises(WireError, match="Deserialize filter failed"):
        put(wire, table, PK, {"n": 9}, condition=b"\xff\xff")
    assert cols(get(wire, table, PK)) .keys() == {"n", "m"}


def test_update_ops_versions_and_increment(wire: Wire) -> None:
    table = create_table(wire, unique("v"), max_versions=3)
    now = int(time.time() * 1000)
    update(wire, table, PK, [("a", "v1", None, now - 3000), ("a", "v2", None, now - 2000),
                             ("a", "v3", None, now - 1000), ("n", 10, None, None)])
    row = get(wire, table, PK, max_versions=3)
    assert [v for _, v in cols(row)["a"]] == ["v3", "v2", "v1"]  # newest first
    assert [v for _, v in cols(get(wire, table, PK))["a"]] == ["v3"]
    update(wire, table, PK, [("a", None, OP_DELETE_ONE, now - 2000)])
    assert [v for _, v in cols(get(wire, table, PK, max_versions=3))["a"]] == ["v3", "v1"]
    row = get(wire, table, PK, max_versions=3, time_range=(now - 1500, now))
    assert [v for _, v in cols(row)["a"]] == ["v3"]
    update(wire, table, PK, [("n", 5, OP_INCREMENT, None)])
    update(wire, table, PK, [("fresh", 2, OP_INCREMENT, None)])
    got = cols(get(wire, table, PK))
    assert got["n"][0][1] == 15 and got["fresh"][0][1] == 2
    update(wire, table, PK, [("a", None, OP_DELETE_ALL, None)])
    assert "a" not in cols(get(wire, table, PK, max_versions=3))


def test_update_deleting_only_on_absent_row_creates_nothing(wire: Wire, table: str) -> None:
    update(wire, table, [("pk", 77)], [("a", None, OP_DELETE_ALL, None)])
    assert get(wire, table, [("pk", 77)]) is None
    put(wire, table, [("pk", 78)], {"a": 1})
    update(wire, table, [("pk", 78)], [("a", None, OP_DELETE_ALL, None)])
    assert get(wire, table, [("pk", 78)]) is None


def test_pk_only_row_exists(wire: Wire, table: str) -> None:
    put(wire, table, [("pk", 9)], {})
    row = get(wire, table, [("pk", 9)])
    assert row is not None and row.pk == [("pk", 9)] and row.cells == []
    with pytest.raises(WireError, match="Condition check failed"):
        put(wire, table, [("pk", 9)], {}, existence=2)


def test_columns_to_get_and_filters_on_read(wire: Wire, table: str) -> None:
    put(wire, table, PK, {"a": 1, "b": 2, "c": 3})
    row = get(wire, table, PK, columns_to_get=["b", "zz", "b"])
    assert row is not None and row.pk == PK and list(cols(row)) == ["b"]
    assert get(wire, table, PK, columns_to_get=["zz"]) is None
    assert get(wire, table, PK, filter=single_filter("a", 1, 2)) is None
    assert get(wire, table, PK, filter=single_filter("a", 1, 1)) is not None
    row = get(wire, table, PK, start_column="b", end_column="c")
    assert list(cols(row)) == ["b"]


def test_pk_validation(wire: Wire) -> None:
    table = create_table(wire, unique("pkv"), [("a", 2), ("b", 1)])
    cases: list[tuple[list[tuple[str, Any]], str, str]] = [
        ([("a", "x")], "OTSInvalidPK", "Validate PK size fail. Input: 1, Meta: 2."),
        ([("b", 1), ("a", "x")], "OTSInvalidPK", "Validate PK name fail. Input: b, Meta: a."),
        ([("a", 1), ("b", 1)], "OTSInvalidPK", "Validate PK type fail. Input: INTEGER, Meta: STRING."),
    ]
    for pk, code, message in cases:
        with pytest.raises(WireError) as e:
            put(wire, table, pk, {"c": 1})
        assert (e.value.status, e.value.code, e.value.message) == (400, code, message)
        with pytest.raises(WireError) as e:
            get(wire, table, pk)
        assert e.value.code == code
    with pytest.raises(WireError, match="MaxLength: 1024"):
        put(wire, table, [("a", "x" * 1025), ("b", 1)], {"c": 1})


def test_write_validation(wire: Wire, table: str) -> None:
    with pytest.raises(WireError, match="Invalid column name: 'bad name'"):
        put(wire, table, PK, {"bad name": 1})
    with pytest.raises(WireError, match="Duplicated attribute column name with primary key column: 'pk'"):
        put(wire, table, PK, {"pk": 1})
    with pytest.raises(WireError, match="NaN can't be set"):
        put(wire, table, PK, {"d": float("nan")})
    with pytest.raises(WireError, match="exceeded the MaxLength:2097152"):
        put(wire, table, PK, {"big": b"x" * (2 * 1024 * 1024 + 1)})
    with pytest.raises(WireError, match="OpType cannot be given"):
        put(wire, table, PK, [("a", None, OP_DELETE_ALL, None)])
    req = pb.DeleteRowRequest(table_name=table, primary_key=encode_primary_key(PK))
    req.condition.row_existence = 0
    with pytest.raises(WireError, match="missing RowDeleteMarker"):
        wire.call("DeleteRow", req)
    with pytest.raises(WireError, match="Timestamp must be given when type is DELETE_ONE_VERSION"):
        update(wire, table, PK, [("a", None, OP_DELETE_ONE, None)])
    with pytest.raises(WireError, match="No version condition"):
        wire.call("GetRow", pb.GetRowRequest(table_name=table, primary_key=encode_primary_key(PK)))
    assert get(wire, table, PK) is None  # nothing was written by any of the rejected requests


def test_time_deviation_check_rejects_whole_write(wire: Wire) -> None:
    table = create_table(wire, unique("dev"), deviation=60)
    now = int(time.time() * 1000)
    with pytest.raises(WireError) as e:
        put(wire, table, PK, [("ok", 1, None, now), ("old", 1, None, now - 3_600_000)])
    assert (e.value.status, e.value.code) == (400, "OTSParameterInvalid")
    assert "Invalid timestamp" in e.value.message and "old" in e.value.message
    assert get(wire, table, PK) is None
    put(wire, table, PK, [("ok", 1, None, now - 30_000)])
    assert get(wire, table, PK) is not None


def test_auto_increment_pk(wire: Wire) -> None:
    table = create_table(wire, unique("auto"), [("part", 2), ("id", 1)], auto_increment="id")
    ids: list[int] = []
    for _ in range(3):
        resp = put(wire, table, [("part", "p"), ("id", AUTO_INCREMENT)], {"v": 1}, return_pk=True)
        row = decode_row(resp.row)
        assert row.pk[0] == ("part", "p")
        assert isinstance(row.pk[1][1], int)
        ids.append(row.pk[1][1])
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert get(wire, table, [("part", "p"), ("id", ids[1])]) is not None
    with pytest.raises(WireError, match="PKAutoIncr can't be used for read operations"):
        get(wire, table, [("part", "p"), ("id", AUTO_INCREMENT)])


def test_ttl_and_time_travel(tmp_path: Any) -> None:
    with EmulatorProcess(data_dir=tmp_path) as emu:
        w = Wire(emu.endpoint)
        table = create_table(w, unique("ttl"), ttl=86400)
        put(w, table, PK, {"a": 1})
        assert get(w, table, PK) is not None
        emu.control.advance_time(2 * 86400)
        assert get(w, table, PK) is None  # expired versions are invisible
        put(w, table, [("pk", 2)], {"a": 1})  # writes use the emulated clock
        assert get(w, table, [("pk", 2)]) is not None


def test_return_content_after_modify_returns_incremented_value(wire: Wire, table: str) -> None:
    put(wire, table, PK, {"n": 10, "other": "x"})
    req = pb.UpdateRowRequest(table_name=table, row_change=encode_row(PK, [("n", 5, OP_INCREMENT, None)]))
    req.condition.row_existence = 0
    req.return_content.return_type = pb.RT_AFTER_MODIFY
    req.return_content.return_column_names.extend(["n", "missing"])
    row = decode_row(wire.call("UpdateRow", req).row)
    assert row.pk == PK and [(c.name, c.value) for c in row.cells] == [("n", 15)]
    assert row.cells[0].ts is not None


def test_conditional_writes_are_atomic_under_concurrency(emulator: EmulatorProcess, table: str) -> None:
    import threading

    outcomes: list[str] = []
    lock = threading.Lock()

    def racer(i: int) -> None:
        w = Wire(emulator.endpoint)
        for key in range(10):
            try:
                put(w, table, [("pk", key)], {"winner": i}, existence=2)
                result = "ok"
            except WireError as e:
                result = e.code
            with lock:
                outcomes.append(result)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == 10  # exactly one winner per key
    assert outcomes.count("OTSConditionCheckFail") == 30
