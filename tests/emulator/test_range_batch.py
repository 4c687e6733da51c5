"""GetRange (direction, INF bounds, limit, page budget, next_start_primary_key) and batch operations."""

from __future__ import annotations

import pytest
from emu_wire import Wire, WireError, create_table, get, get_range, pb, put, scan_all, single_filter, unique

from airflow_tablestore.emulator.codec.decode import decode_row
from airflow_tablestore.emulator.codec.encode import encode_primary_key, encode_row
from airflow_tablestore.emulator.codec.format import INF_MAX, INF_MIN

ALL = ([("pk", INF_MIN)], [("pk", INF_MAX)])


def _batch_put(wire: Wire, table: str, pks: list[list], cols: dict | None = None) -> pb.BatchWriteRowResponse:
    req = pb.BatchWriteRowRequest()
    t = req.tables.add(table_name=table)
    for pk in pks:
        r = t.rows.add(type=pb.PUT, row_change=encode_row(pk, [(k, v, None, None) for k, v in
                                                                     (cols or {"v": 1}).items()]))
        r.condition.row_existence = 0
    return wire.call("BatchWriteRow", req)


def test_forward_backward_limit_and_paging(wire: Wire) -> None:
    table = create_table(wire, unique("r"))
    for chunk in range(0, 120, 40):
        resp = _batch_put(wire, table, [[("pk", i)] for i in range(chunk, chunk + 40)])
        assert all(r.is_ok for r in resp.tables[0].rows)
    rows, nxt = get_range(wire, table, *ALL, limit=10)
    assert [r.pk[0][1] for r in rows] == list(range(10)) and nxt is not None and nxt.pk == [("pk", 10)]
    rows, nxt = get_range(wire, table, [("pk", 5)], [("pk", 8)])
    assert [r.pk[0][1] for r in rows] == [5, 6, 7] and nxt is None
    rows, nxt = get_range(wire, table, [("pk", 7)], [("pk", 4)], backward=True)
    assert [r.pk[0][1] for r in rows] == [7, 6, 5] and nxt is None
    # page budget is 50 rows in this emulator: the whole table needs 3 pages
    rows, pages = scan_all(wire, table, *ALL)
    assert [r.pk[0][1] for r in rows] == list(range(120)) and pages == 3
    rows, _ = scan_all(wire, table, [("pk", INF_MAX)], [("pk", INF_MIN)], backward=True)
    assert [r.pk[0][1] for r in rows] == list(range(119, -1, -1))
    # with a filter the budget counts scanned rows: empty pages may carry a next key
    rows, pages = scan_all(wire, table, *ALL, filter=single_filter("v", 1, 2))
    assert rows == [] and pages == 3
    # a filtered page scans the whole budget, not just `limit` rows
    rows, pages = scan_all(wire, table, *ALL, limit=1, filter=single_filter("pk", 1, 100))
    assert [r.pk[0][1] for r in rows] == [100] and pages == 4
    empty, nxt = get_range(wire, table, [("pk", 1000)], [("pk", 2000)])
    assert empty == [] and nxt is None


def test_range_errors(wire: Wire, table: str) -> None:
    with pytest.raises(WireError, match="^400 OTSParameterInvalid: Begin key must less than end key in FORWARD$"):
        get_range(wire, table, [("pk", 5)], [("pk", 5)])
    with pytest.raises(WireError, match="Begin key must more than end key in BACKWARD"):
        get_range(wire, table, [("pk", 1)], [("pk", 5)], backward=True)
    with pytest.raises(WireError, match="The limit must be greater than 0."):
        get_range(wire, table, *ALL, limit=0)
    with pytest.raises(WireError) as e:
        get_range(wire, table, [("x", 1)], [("pk", 5)])
    assert e.value.code == "OTSInvalidPK"


def test_multi_column_inf_bounds(wire: Wire) -> None:
    table = create_table(wire, unique("r2"), [("a", 2), ("b", 1)])
    _batch_put(wire, table, [[("a", a), ("b", b)] for a in ("a", "b", "c") for b in (1, 2)])
    rows, _ = get_range(wire, table, [("a", "a"), ("b", INF_MAX)], [("a", "c"), ("b", INF_MIN)])
    assert [r.pk for r in rows] == [[("a", "b"), ("b", 1)], [("a", "b"), ("b", 2)]]
    rows, _ = get_range(wire, table, [("a", "a"), ("b", INF_MAX)], [("a", "b"), ("b", INF_MIN)])
    assert rows == []
    rows, _ = get_range(wire, table, [("a", "b"), ("b", 2)], [("a", INF_MAX), ("b", INF_MAX)])
    assert [r.pk for r in rows][0] == [("a", "b"), ("b", 2)] and len(rows) == 3


def test_string_order_is_utf8_bytes(wire: Wire) -> None:
    table = create_table(wire, unique("r3"), [("s", 2)])
    keys = ["put_row", "putRow", "a", "", "ab", "é", "z"]
    _batch_put(wire, table, [[("s", k)] for k in keys])
    rows, _ = get_range(wire, table, [("s", INF_MIN)], [("s", INF_MAX)])
    assert [r.pk[0][1] for r in rows] == sorted(keys, key=lambda k: k.encode())


def test_batch_write_per_row_results(wire: Wire, table: str) -> None:
    put(wire, table, [("pk", 2)], {"v": "old"})
    put(wire, table, [("pk", 4)], {"v": "doomed"})
    req = pb.BatchWriteRowRequest()
    t = req.tables.add(table_name=table)
    r = t.rows.add(type=pb.PUT, row_change=encode_row([("pk", 1)], [("v", "a", None, None)]))
    r.condition.row_existence = 0
    r = t.rows.add(type=pb.PUT, row_change=encode_row([("pk", 2)], [("v", "new", None, None)]))
    r.condition.row_existence = 2  # fails: exists
    r = t.rows.add(type=pb.UPDATE, row_change=encode_row([("bad", 3)], [("v", "c", None, None)]))
    r.condition.row_existence = 0
    r = t.rows.add(type=pb.DELETE, row_change=encode_row([("pk", 4)], [], delete_marker=True))
    r.condition.row_existence = 0
    resp = wire.call("BatchWriteRow", req)
    out = resp.tables[0].rows
    assert resp.tables[0].table_name == table
    assert [x.is_ok for x in out] == [True, False, False, True]
    assert out[1].error.code == "OTSConditionCheckFail"
    assert out[2].error.code == "OTSInvalidPK"
    assert out[0].consumed.capacity_unit.HasField("read")
    assert get(wire, table, [("pk", 1)]) is not None and get(wire, table, [("pk", 4)]) is None
    kept = get(wire, table, [("pk", 2)])
    assert kept is not None and kept.cells[0].value == "old"


def test_batch_write_limits_and_duplicates(wire: Wire, table: str) -> None:
    with pytest.raises(WireError, match="Rows count exceeds the upper limit:200"):
        _batch_put(wire, table, [[("pk", i)] for i in range(201)])
    with pytest.raises(WireError, match="No row is specified in BatchWriteRow."):
        wire.call("BatchWriteRow", pb.BatchWriteRowRequest())
    req = pb.BatchWriteRowRequest()
    req.tables.add(table_name=table)
    with pytest.raises(WireError, match=f"No operation is specified for table: '{table}'."):
        wire.call("BatchWriteRow", req)
    # duplicates with IGNORE are applied in order
    resp = _batch_put(wire, table, [[("pk", 5)], [("pk", 5)]])
    assert all(r.is_ok for r in resp.tables[0].rows)
    req = pb.BatchWriteRowRequest()
    t = req.tables.add(table_name=table)
    for existence in (0, 1):
        r = t.rows.add(type=pb.PUT, row_change=encode_row([("pk", 6)], [("v", 1, None, None)]))
        r.condition.row_existence = existence
    with pytest.raises(WireError, match="Repeated rows do not support row exist expectation check"):
        wire.call("BatchWriteRow", req)
    with pytest.raises(WireError) as e:
        _batch_put(wire, "no_such_table", [[("pk", 1)]])
    assert e.value.status == 404
    assert get(wire, table, [("pk", 6)]) is None


def test_batch_get(wire: Wire, table: str) -> None:
    other = create_table(wire, unique("bg"))
    put(wire, table, [("pk", 1)], {"v": 1})
    put(wire, other, [("pk", 1)], {"w": 2})
    req = pb.BatchGetRowRequest()
    t = req.tables.add(table_name=table, max_versions=1)
    t.primary_key.extend([encode_primary_key([("pk", 1)]), encode_primary_key([("pk", 2)]),
                          encode_primary_key([("zz", 1)])])
    t2 = req.tables.add(table_name=other, max_versions=1)
    t2.primary_key.append(encode_primary_key([("pk", 1)]))
    resp = wire.call("BatchGetRow", req)
    assert [x.table_name for x in resp.tables] == [table, other]
    rows = resp.tables[0].rows
    assert [r.is_ok for r in rows] == [True, True, False]
    assert decode_row(rows[0].row).cells[0].value == 1 and rows[1].row == b""
    assert rows[2].error.code == "OTSInvalidPK"
    assert decode_row(resp.tables[1].rows[0].row).cells[0].name == "w"
    big = pb.BatchGetRowRequest()
    bt = big.tables.add(table_name=table, max_versions=1)
    bt.primary_key.extend([encode_primary_key([("pk", i)]) for i in range(101)])
    with pytest.raises(WireError, match="Rows count exceeds the upper limit:100"):
        wire.call("BatchGetRow", big)
