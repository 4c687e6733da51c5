"""Conformance scenario run by the official ``tablestore`` SDK (in ``.oracle-venv``) against the emulator.

Not a pytest module: ``tests/conformance/test_official_sdk.py`` runs it with the oracle venv's interpreter::

    python sdk_scenario.py ENDPOINT INSTANCE ACCESS_KEY_ID ACCESS_KEY_SECRET MODE

``MODE`` is ``python`` (the SDK's pure-Python PlainBuffer decoder) or ``native`` (its C parser, without fallback).
Every step asserts what the SDK got back; a failing step is recorded and the scenario goes on, so one run
reports every difference. The last stdout line is a JSON summary: ``{"steps": {name: "ok" | error}, ...}``.

In the SDK ``bytearray`` is BINARY and ``bytes`` is STRING (it comes back as ``str``).
"""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

logging.disable(logging.CRITICAL)  # the SDK logs every service error at ERROR level

from tablestore import (  # noqa: E402
    INF_MAX,
    INF_MIN,
    PK_AUTO_INCR,
    BatchGetRowRequest,
    BatchWriteRowRequest,
    CapacityUnit,
    ComparatorType,
    CompositeColumnCondition,
    Condition,
    DeleteRowItem,
    Direction,
    LogicalOperator,
    OTSClient,
    OTSServiceError,
    PutRowItem,
    ReservedThroughput,
    ReturnType,
    Row,
    RowExistenceExpectation,
    SingleColumnCondition,
    TableInBatchGetRowItem,
    TableInBatchWriteRowItem,
    TableMeta,
    TableOptions,
    UpdateRowItem,
)
from tablestore.retry import NoRetryPolicy  # noqa: E402

ENDPOINT, INSTANCE, AK_ID, AK_SECRET, MODE = sys.argv[1:6]
TYPES = "sdk_types_" + MODE
RANGE = "sdk_range_" + MODE
MISSING = "sdk_no_such_table"
NOW_MS = int(time.time() * 1000) - 60_000  # inside the default max time deviation (1 day)
RANGE_ROWS = 25


def make_client(secret: str = AK_SECRET) -> OTSClient:
    native = MODE == "native"
    return OTSClient(
        ENDPOINT,
        AK_ID,
        secret,
        INSTANCE,
        retry_policy=NoRetryPolicy(),
        enable_native=native,
        native_fallback=not native,
    )


client = make_client()
results: dict[str, str] = {}
facts: dict[str, Any] = {"mode": MODE}


def step(fn: Callable[[], None]) -> Callable[[], None]:
    try:
        fn()
        results[fn.__name__] = "ok"
    except Exception:  # noqa: BLE001 - every failure is reported in the summary
        results[fn.__name__] = traceback.format_exc(limit=4)[-1500:]
    return fn


def expect_error(code: str, fn: Callable[[], Any], status: int | None = None) -> OTSServiceError:
    try:
        fn()
    except OTSServiceError as exc:
        assert exc.get_error_code() == code, f"expected {code}, got {exc.get_error_code()}: {exc.get_error_message()}"
        if status is not None:
            assert exc.get_http_status() == status, f"{code}: HTTP {exc.get_http_status()}, expected {status}"
        assert exc.get_request_id(), f"{code} without a request id"
        return exc
    raise AssertionError(f"expected {code}, but the call succeeded")


def types_pk(key: str, number: int = 1) -> list[tuple[str, Any]]:
    return [("pk_s", key), ("pk_i", number), ("pk_b", bytearray(b"\x00\x01"))]


def attrs(row: Row) -> dict[str, list[tuple[Any, int]]]:
    out: dict[str, list[tuple[Any, int]]] = {}
    for name, value, ts in row.attribute_columns:
        out.setdefault(name, []).append((value, ts))
    return out


# ---- steps --------------------------------------------------------------------------------------


@step
def ddl_create_describe_list() -> None:
    for name in (TYPES, RANGE):
        if name in client.list_table():
            client.delete_table(name)
    before = set(client.list_table())
    client.create_table(
        TableMeta(TYPES, [("pk_s", "STRING"), ("pk_i", "INTEGER"), ("pk_b", "BINARY")]),
        TableOptions(time_to_live=-1, max_version=3, max_time_deviation=86400),
        ReservedThroughput(CapacityUnit(0, 0)),
    )
    client.create_table(
        TableMeta(RANGE, [("id", "INTEGER")]), TableOptions(-1, 1), ReservedThroughput(CapacityUnit(0, 0))
    )
    expect_error(
        "OTSObjectAlreadyExist",
        lambda: client.create_table(
            TableMeta(RANGE, [("id", "INTEGER")]), TableOptions(), ReservedThroughput(CapacityUnit(0, 0))
        ),
        409,
    )
    described = client.describe_table(TYPES)
    assert described.table_meta.table_name == TYPES
    assert described.table_meta.schema_of_primary_key == [
        ("pk_s", "STRING"),
        ("pk_i", "INTEGER"),
        ("pk_b", "BINARY"),
    ], described.table_meta.schema_of_primary_key
    assert described.table_options.max_version == 3
    assert described.table_options.time_to_live == -1
    assert described.table_options.max_time_deviation == 86400
    listed = set(client.list_table())
    assert listed == before | {TYPES, RANGE}, listed


@step
def put_get_every_type() -> None:
    columns = [
        ("s", "héllo"),
        ("i", 42),
        ("neg", -(2**63)),
        ("f", 1.5),
        ("t", True),
        ("bin", bytearray(b"\xff\x00\x01")),
        ("raw", b"raw-bytes"),  # bytes is STRING in the SDK
        ("v", "versioned", NOW_MS),
    ]
    consumed, returned = client.put_row(TYPES, Row(types_pk("a"), columns), Condition("IGNORE"))
    assert consumed.write >= 1 and returned is None
    _, row, _ = client.get_row(TYPES, types_pk("a"), max_version=1)
    assert row is not None
    assert row.primary_key == types_pk("a"), row.primary_key
    got = {name: value for name, value, _ in row.attribute_columns}
    expected = {
        "s": "héllo",
        "i": 42,
        "neg": -(2**63),
        "f": 1.5,
        "t": True,
        "bin": bytearray(b"\xff\x00\x01"),
        "raw": "raw-bytes",
        "v": "versioned",
    }
    assert got == expected, got
    assert [type(got[k]) for k in ("s", "i", "f", "t", "bin")] == [str, int, float, bool, bytearray]
    names = [name for name, _, _ in row.attribute_columns]
    assert names == sorted(names), f"columns not sorted by name: {names}"
    assert dict((n, ts) for n, _, ts in row.attribute_columns)["v"] == NOW_MS
    _, only, _ = client.get_row(TYPES, types_pk("a"), columns_to_get=["i", "t"])
    assert [(n, v) for n, v, _ in only.attribute_columns] == [("i", 42), ("t", True)]
    _, missing, _ = client.get_row(TYPES, types_pk("nope"))
    assert missing is None


@step
def update_row_all_ops() -> None:
    client.put_row(TYPES, Row(types_pk("u"), [("keep", 1), ("gone", "x"), ("n", 10), ("v", "v1", NOW_MS)]))
    # PutRow replaces the whole row; UpdateRow adds a version.
    client.update_row(TYPES, Row(types_pk("u"), {"put": [("v", "v2", NOW_MS + 1)]}), Condition("IGNORE"))
    _, row, _ = client.get_row(TYPES, types_pk("u"), max_version=3, columns_to_get=["v"])
    assert attrs(row)["v"] == [("v2", NOW_MS + 1), ("v1", NOW_MS)], attrs(row)
    change = {
        "put": [("new", "added"), ("keep", 2)],
        "delete": [("v", None, NOW_MS + 1)],
        "delete_all": ["gone"],
        "increment": [("n", 5)],
    }
    client.update_row(TYPES, Row(types_pk("u"), change), Condition("EXPECT_EXIST"))
    _, row, _ = client.get_row(TYPES, types_pk("u"), max_version=3)
    versions = attrs(row)
    assert "gone" not in versions, versions
    assert [v for v, _ in versions["v"]] == ["v1"], versions["v"]
    assert versions["new"][0][0] == "added"
    assert versions["keep"][0][0] == 2
    assert versions["n"][0][0] == 15, versions["n"]
    expect_error(
        "OTSConditionCheckFail",
        lambda: client.update_row(TYPES, Row(types_pk("absent"), {"put": [("x", 1)]}), Condition("EXPECT_EXIST")),
        403,
    )
    # An increment past int64 is a parameter error, not a server error.
    client.put_row(TYPES, Row(types_pk("max"), [("n", 2**63 - 1)]))
    expect_error(
        "OTSParameterInvalid",
        lambda: client.update_row(TYPES, Row(types_pk("max"), {"increment": [("n", 1)]}), Condition("IGNORE")),
        400,
    )


@step
def delete_row() -> None:
    client.put_row(TYPES, Row(types_pk("d"), [("x", 1)]))
    client.delete_row(TYPES, Row(types_pk("d")), Condition("EXPECT_EXIST"))
    _, row, _ = client.get_row(TYPES, types_pk("d"))
    assert row is None
    expect_error(
        "OTSConditionCheckFail",
        lambda: client.delete_row(TYPES, Row(types_pk("d")), Condition("EXPECT_EXIST")),
        403,
    )


@step
def conditions() -> None:
    client.put_row(TYPES, Row(types_pk("c"), [("i", 7)]))
    expect_error(
        "OTSConditionCheckFail",
        lambda: client.put_row(TYPES, Row(types_pk("c"), [("i", 8)]), Condition("EXPECT_NOT_EXIST")),
        403,
    )
    wrong = Condition(RowExistenceExpectation.EXPECT_EXIST, SingleColumnCondition("i", 999, ComparatorType.EQUAL))
    expect_error("OTSConditionCheckFail", lambda: client.put_row(TYPES, Row(types_pk("c"), [("i", 8)]), wrong), 403)
    right = Condition(RowExistenceExpectation.EXPECT_EXIST, SingleColumnCondition("i", 7, ComparatorType.EQUAL))
    client.put_row(TYPES, Row(types_pk("c"), [("i", 8)]), right)
    _, row, _ = client.get_row(TYPES, types_pk("c"))
    assert row.attribute_columns[0][1] == 8


@step
def batch_write_with_failing_row() -> None:
    client.put_row(TYPES, Row(types_pk("b-exists"), [("x", 0)]))
    client.put_row(TYPES, Row(types_pk("b-del"), [("x", 0)]))
    items = [
        PutRowItem(Row(types_pk("b1"), [("x", 1)]), Condition("IGNORE")),
        PutRowItem(Row(types_pk("b-exists"), [("x", 2)]), Condition("EXPECT_NOT_EXIST")),  # fails
        PutRowItem(Row(types_pk("b3"), [("x", 3), ("bin", bytearray(b"\x01"))]), Condition("IGNORE")),
        UpdateRowItem(Row(types_pk("b1"), {"put": [("y", "u")]}), Condition("IGNORE")),
        DeleteRowItem(Row(types_pk("b-del")), Condition("IGNORE")),
    ]
    request = BatchWriteRowRequest()
    request.add(TableInBatchWriteRowItem(TYPES, items))
    response = client.batch_write_row(request)
    assert not response.is_all_succeed()
    succeeded, failed = response.get_put()
    assert len(succeeded) == 2 and len(failed) == 1, (len(succeeded), len(failed))
    assert failed[0].index == 1 and failed[0].error_code == "OTSConditionCheckFail", vars(failed[0])
    assert not response.get_failed_of_update() and not response.get_failed_of_delete()

    get = BatchGetRowRequest()
    keys = [types_pk(k) for k in ("b1", "b-exists", "b3", "b-del")]
    get.add(TableInBatchGetRowItem(TYPES, keys, max_version=1))
    rows = client.batch_get_row(get).get_result_by_table(TYPES)
    assert [item.is_ok for item in rows] == [True] * 4
    values: list[Any] = [attrs(item.row) if item.row is not None else None for item in rows]
    assert values[0]["x"][0][0] == 1 and values[0]["y"][0][0] == "u", values[0]
    assert values[1]["x"][0][0] == 0, "the failed row must not have been written"
    assert values[2]["bin"][0][0] == bytearray(b"\x01")
    assert values[3] is None, "the deleted row is still there"


@step
def get_range_pagination() -> None:
    request = BatchWriteRowRequest()
    request.add(
        TableInBatchWriteRowItem(
            RANGE, [PutRowItem(Row([("id", i)], [("sq", i * i)]), Condition("IGNORE")) for i in range(RANGE_ROWS)]
        )
    )
    assert client.batch_write_row(request).is_all_succeed()

    # Client-side pages: limit=7 and follow next_start_primary_key.
    seen: list[int] = []
    start: Any = [("id", INF_MIN)]
    pages = 0
    while start is not None:
        _, start, rows, _ = client.get_range(RANGE, Direction.FORWARD, start, [("id", INF_MAX)], limit=7)
        pages += 1
        assert len(rows) <= 7
        seen.extend(r.primary_key[0][1] for r in rows)
        assert pages < 50
    assert seen == list(range(RANGE_ROWS)), seen
    assert pages >= 4, pages
    facts["limit_pages"] = pages

    # Server-side pages (the emulator runs with a small --range-page-rows): no limit, still paginated.
    _, next_pk, rows, _ = client.get_range(RANGE, Direction.FORWARD, [("id", INF_MIN)], [("id", INF_MAX)])
    assert next_pk is not None and len(rows) < RANGE_ROWS, (next_pk, len(rows))
    assert next_pk == [("id", len(rows))], next_pk
    facts["server_page_rows"] = len(rows)

    backward = [
        r.primary_key[0][1]
        for r in client.xget_range(RANGE, Direction.BACKWARD, [("id", INF_MAX)], [("id", INF_MIN)], CapacityUnit(0, 0))
    ]
    assert backward == list(reversed(range(RANGE_ROWS))), backward

    _, next_pk, rows, _ = client.get_range(RANGE, Direction.FORWARD, [("id", 5)], [("id", 10)])
    assert next_pk is None
    assert [(r.primary_key[0][1], r.attribute_columns[0][1]) for r in rows] == [(i, i * i) for i in range(5, 10)]


SPLIT_API = "ComputeSplitPointsBySize"  # in the SDK's proto, but the SDK has no call for it


def _decode_split_points(body: bytes, request_id: str) -> tuple[Any, Any]:
    """The SDK's decoder contract for our added API: the response proto, each split point decoded by the
    SDK's own PlainBuffer decoder (the C parser without fallback in native mode)."""
    from tablestore.native import parse_single_row
    from tablestore.plainbuffer.plain_buffer_coded_stream import PlainBufferCodedInputStream
    from tablestore.plainbuffer.plain_buffer_stream import PlainBufferInputStream
    from tablestore.protobuf import table_store_pb2

    proto = table_store_pb2.ComputeSplitPointsBySizeResponse.FromString(body)
    points = []
    for raw in proto.split_points:
        if MODE == "native":
            primary_key, columns = parse_single_row(raw)
        else:
            primary_key, columns = PlainBufferCodedInputStream(PlainBufferInputStream(raw)).read_row()
        assert not columns, columns
        points.append(list(primary_key))
    return (proto, points), proto


def compute_split_points(table: str, split_size: int, unit: int | None = None, limit: int | None = None) -> Any:
    """ComputeSplitPointsBySize through the SDK's own request path: its encoder map, signing, connection pool,
    response checks (MD5, date, signature) and decoder map, with our API added to each."""
    from tablestore.protobuf import table_store_pb2

    protocol = client.protocol
    if SPLIT_API not in protocol.api_list:
        protocol.api_list = [*protocol.api_list, SPLIT_API]
        protocol.encoder.api_encode_map[SPLIT_API] = lambda proto: proto
        protocol.decoder.api_decode_map[SPLIT_API] = _decode_split_points
    request = table_store_pb2.ComputeSplitPointsBySizeRequest(table_name=table, split_size=split_size)
    if unit is not None:
        request.split_size_unit_in_byte = unit
    if limit is not None:  # split_point_limit = 4 is not in the SDK's proto: kept as an unknown field
        raw = request.SerializeToString() + bytes((4 << 3, limit))
        request = table_store_pb2.ComputeSplitPointsBySizeRequest.FromString(raw)
    return client._request_helper(SPLIT_API, request)


@step
def compute_split_points_by_size() -> None:
    name = "sdk_split_" + MODE
    if name in client.list_table():
        client.delete_table(name)
    client.create_table(
        TableMeta(name, [("g", "STRING"), ("n", "INTEGER")]), TableOptions(-1, 1),
        ReservedThroughput(CapacityUnit(0, 0)),
    )
    keys = [(f"g{i // 5:03d}", i) for i in range(200)]
    for start in range(0, len(keys), 100):
        request = BatchWriteRowRequest()
        rows = [Row([("g", g), ("n", n)], [("v", "x" * 300)]) for g, n in keys[start:start + 100]]
        request.add(TableInBatchWriteRowItem(name, [PutRowItem(row, Condition("IGNORE")) for row in rows]))
        assert client.batch_write_row(request).is_all_succeed()

    proto, points = compute_split_points(name, 4, unit=1024)
    assert [(s.name, s.type) for s in proto.schema] == [("g", 2), ("n", 1)], proto.schema
    assert proto.consumed.capacity_unit.HasField("read") and proto.consumed.capacity_unit.HasField("write")
    assert len(points) >= 10, points
    assert all(len(point) == 1 and point[0][0] == "g" for point in points), points
    values = [point[0][1] for point in points]
    assert values == sorted(set(values)) and values[0] != keys[0][0], values
    assert sum(loc.repeat for loc in proto.locations) == len(points) + 1, proto.locations
    facts["split_points"] = len(points)

    # The ranges between them, padded with INF_MIN, cover the table once (read with the SDK's GetRange).
    bounds = [[("g", INF_MIN), ("n", INF_MIN)], *([("g", v), ("n", INF_MIN)] for v in values)]
    bounds.append([("g", INF_MAX), ("n", INF_MAX)])
    scanned = [
        tuple(value for _, value in row.primary_key)
        for low, high in zip(bounds, bounds[1:], strict=False)
        for row in client.xget_range(name, Direction.FORWARD, low, high, CapacityUnit(0, 0))
    ]
    assert scanned == keys, scanned[:5]

    limited, limited_points = compute_split_points(name, 4, unit=1024, limit=3)
    assert len(limited_points) == 3 and [loc.repeat for loc in limited.locations] == [4], limited.locations
    assert compute_split_points(name, 1)[1] == []  # default unit: 100 MB
    expect_error("OTSParameterInvalid", lambda: compute_split_points(name, 0), 400)
    expect_error("OTSObjectNotExist", lambda: compute_split_points(MISSING, 1), 404)
    client.delete_table(name)


@step
def errors() -> None:
    expect_error("OTSObjectNotExist", lambda: client.get_row(MISSING, [("id", 1)]), 404)
    expect_error("OTSObjectNotExist", lambda: client.describe_table(MISSING), 404)
    bad = make_client(secret="not-the-secret")
    expect_error("OTSAuthFailed", bad.list_table, 403)


@step
def delete_tables() -> None:
    client.delete_table(TYPES)
    client.delete_table(RANGE)
    listed = client.list_table()
    assert TYPES not in listed and RANGE not in listed, listed
    expect_error("OTSObjectNotExist", lambda: client.delete_table(TYPES), 404)


@step
def project_protobuf_modules_under_sdk_protobuf() -> None:
    # The project's generated modules must import and work with the SDK's protobuf (5.x), in the same process
    # as the SDK's own table_store.proto (distinct file and package names: no descriptor-pool clash).
    import importlib

    import google.protobuf

    ots_filter_pb2: Any = importlib.import_module("airflow_tablestore.protocol.ots_filter_pb2")
    ots_table_pb2: Any = importlib.import_module("airflow_tablestore.protocol.ots_table_pb2")
    ots_tunnel_pb2: Any = importlib.import_module("airflow_tablestore.protocol.ots_tunnel_pb2")

    facts["protobuf"] = google.protobuf.__version__
    assert int(google.protobuf.__version__.split(".")[0]) < 6, google.protobuf.__version__
    put = ots_table_pb2.PutRowRequest(table_name="t", row=b"\x75\x00\x00\x00")
    put.condition.row_existence = ots_table_pb2.EXPECT_NOT_EXIST
    again = ots_table_pb2.PutRowRequest.FromString(put.SerializeToString())
    assert again == put and again.condition.row_existence == ots_table_pb2.EXPECT_NOT_EXIST
    records = ots_tunnel_pb2.ReadRecordsResponse()
    record = records.records.add()
    record.action_type = ots_tunnel_pb2.UPDATE_ROW
    record.record = b"\x75\x00\x00\x00"
    records.next_token = "token"
    decoded = ots_tunnel_pb2.ReadRecordsResponse.FromString(records.SerializeToString())
    assert decoded.records[0].action_type == ots_tunnel_pb2.UPDATE_ROW and decoded.next_token == "token"
    assert ots_filter_pb2.DESCRIPTOR.package != "com.aliyun.tablestore.protocol"


@step
def auto_increment_filters_versions_update_table() -> None:
    name = "sdk_more_" + MODE
    if name in client.list_table():
        client.delete_table(name)
    client.create_table(
        TableMeta(name, [("part", "INTEGER"), ("seq", "INTEGER", PK_AUTO_INCR)]),
        TableOptions(-1, 5),
        ReservedThroughput(CapacityUnit(0, 0)),
    )
    assert client.describe_table(name).table_meta.schema_of_primary_key[1] == ("seq", "INTEGER", PK_AUTO_INCR)
    seqs = []
    for i in range(4):
        _, returned = client.put_row(
            name,
            Row([("part", 1), ("seq", PK_AUTO_INCR)], [("n", i), ("v", "a", NOW_MS)]),
            Condition("IGNORE"),
            return_type=ReturnType.RT_PK,
        )
        assert returned.primary_key[0] == ("part", 1)
        seqs.append(returned.primary_key[1][1])
    assert seqs == sorted(seqs) and len(set(seqs)) == 4, seqs
    first = [("part", 1), ("seq", seqs[0])]
    client.update_row(name, Row(first, {"put": [("v", "b", NOW_MS + 1), ("v", "c", NOW_MS + 2)]}), Condition("IGNORE"))

    _, row, _ = client.get_row(name, first, max_version=2, columns_to_get=["v"])
    assert [(v, ts) for _, v, ts in row.attribute_columns] == [("c", NOW_MS + 2), ("b", NOW_MS + 1)]
    _, row, _ = client.get_row(name, first, time_range=(NOW_MS, NOW_MS + 2), max_version=None, columns_to_get=["v"])
    assert [v for _, v, _ in row.attribute_columns] == ["b", "a"], row.attribute_columns
    _, row, _ = client.get_row(name, first, time_range=NOW_MS + 1, max_version=None, columns_to_get=["v"])
    assert [v for _, v, _ in row.attribute_columns] == ["b"], row.attribute_columns

    equal = SingleColumnCondition("n", 0, ComparatorType.EQUAL)
    assert client.get_row(name, first, column_filter=equal)[1] is not None
    miss = SingleColumnCondition("n", 1, ComparatorType.EQUAL)
    assert client.get_row(name, first, column_filter=miss)[1] is None
    between = CompositeColumnCondition(LogicalOperator.AND)
    between.add_sub_condition(SingleColumnCondition("n", 0, ComparatorType.GREATER_THAN))
    between.add_sub_condition(SingleColumnCondition("n", 2, ComparatorType.LESS_EQUAL))
    _, _, rows, _ = client.get_range(
        name, Direction.FORWARD, [("part", 1), ("seq", INF_MIN)], [("part", 1), ("seq", INF_MAX)], column_filter=between
    )
    assert [r.attribute_columns[0][1] for r in rows] == [1, 2], [r.attribute_columns for r in rows]

    missing_table = BatchGetRowRequest()
    missing_table.add(TableInBatchGetRowItem(MISSING, [[("id", 1)]], max_version=1))
    expect_error("OTSObjectNotExist", lambda: client.batch_get_row(missing_table), 404)

    client.update_table(name, TableOptions(time_to_live=172800, max_version=2))
    options = client.describe_table(name).table_options
    assert (options.time_to_live, options.max_version) == (172800, 2), vars(options)
    client.delete_table(name)


@step
def async_client() -> None:
    # aiohttp transport: sends Content-Type, Accept and gzip Accept-Encoding, unlike the sync client.
    import asyncio

    from tablestore import AsyncOTSClient

    name = "sdk_async_" + MODE

    async def scenario() -> None:
        aclient = AsyncOTSClient(ENDPOINT, AK_ID, AK_SECRET, INSTANCE, retry_policy=NoRetryPolicy())
        try:
            await aclient.create_table(
                TableMeta(name, [("id", "INTEGER")]), TableOptions(), ReservedThroughput(CapacityUnit(0, 0))
            )
            assert name in await aclient.list_table()
            await aclient.put_row(name, Row([("id", 1)], [("x", "y"), ("b", bytearray(b"\x00"))]))
            _, row, _ = await aclient.get_row(name, [("id", 1)])
            assert [(n, v) for n, v, _ in row.attribute_columns] == [("b", bytearray(b"\x00")), ("x", "y")]
            _, next_pk, rows, _ = await aclient.get_range(name, "FORWARD", [("id", INF_MIN)], [("id", INF_MAX)])
            assert next_pk is None and len(rows) == 1
            await aclient.delete_table(name)
        finally:
            await aclient.close()

    asyncio.run(scenario())


@step
def signing_v4_and_sts() -> None:
    v4 = OTSClient(ENDPOINT, AK_ID, AK_SECRET, INSTANCE, region="cn-hangzhou", retry_policy=NoRetryPolicy())
    assert isinstance(v4.list_table(), tuple)
    bad_v4 = OTSClient(ENDPOINT, AK_ID, "wrong", INSTANCE, region="cn-hangzhou", retry_policy=NoRetryPolicy())
    expect_error("OTSAuthFailed", bad_v4.list_table, 403)
    sts = OTSClient(ENDPOINT, AK_ID, AK_SECRET, INSTANCE, sts_token="sts-token", retry_policy=NoRetryPolicy())
    try:
        sts.list_table()
        facts["sts_token_accepted"] = True
    except OTSServiceError as exc:
        facts["sts_token_accepted"] = exc.get_error_code()


@step
def codec_matches_sdk() -> None:
    # The project's encoder must produce the SDK's bytes, and decode what the SDK encodes.
    import os
    import random
    import types

    from tablestore.plainbuffer.plain_buffer_builder import PlainBufferBuilder as B

    import airflow_tablestore

    # Load the codec without the client package's __init__ (which needs `requests`, absent here): the codec
    # itself needs only the standard library, the model and the errors.
    package = types.ModuleType("airflow_tablestore.client")
    package.__path__ = [os.path.join(os.path.dirname(airflow_tablestore.__file__), "client")]
    sys.modules.setdefault("airflow_tablestore.client", package)
    from airflow_tablestore.client import model as m
    from airflow_tablestore.client.plainbuffer.decode import decode_row
    from airflow_tablestore.client.plainbuffer.encode import encode_primary_key, encode_row
    from airflow_tablestore.client.plainbuffer.sqlvariant import encode_sql_variant

    def ours(value: Any) -> Any:
        if value is INF_MIN:
            return m.INF_MIN
        if value is INF_MAX:
            return m.INF_MAX
        if isinstance(value, bytearray):
            return bytes(value)
        return value

    def our_pk(pk: list[tuple[str, Any]]) -> tuple[tuple[str, Any], ...]:
        return tuple((n, ours(v)) for n, v in pk)

    rnd = random.Random(11)

    def value() -> Any:
        kind = rnd.randrange(5)
        if kind == 0:
            return rnd.randrange(-(2**63), 2**63)
        if kind == 1:
            return rnd.uniform(-1e12, 1e12)
        if kind == 2:
            return rnd.random() < 0.5
        if kind == 3:
            return "".join(rnd.choice("abcé漢") for _ in range(rnd.randrange(20)))
        return bytearray(rnd.randbytes(rnd.randrange(20)))

    checked = 0
    for i in range(200):
        pk = [("a", rnd.randrange(-(2**63), 2**63)), ("b", f"k{i}"), ("c", bytearray(rnd.randbytes(4)))][
            : 1 + i % 3
        ]
        cols = [(f"c{j}", value()) + ((NOW_MS + j,) if j % 2 else ()) for j in range(i % 6)]
        sdk_put = bytes(B.serialize_for_put_row(pk, cols))
        row = m.Row(
            our_pk(pk), tuple(m.Column(c[0], ours(c[1]), c[2] if len(c) > 2 else None) for c in cols)  # type: ignore[arg-type]
        )
        assert encode_row(row) == sdk_put, (pk, cols)
        assert decode_row(sdk_put) == row
        sdk_delete = bytes(B.serialize_for_delete_row(pk))
        assert encode_row(m.Row(our_pk(pk), (), True)) == sdk_delete
        assert bytes(B.serialize_primary_key(pk)) == encode_primary_key(our_pk(pk))
        checked += 3
    bounds = [("a", INF_MIN), ("b", INF_MAX), ("c", 5)]
    assert bytes(B.serialize_primary_key(bounds)) == encode_primary_key(our_pk(bounds))
    update = {
        "put": [("p", 1), ("q", "x", NOW_MS)],
        "delete": [("d", None, NOW_MS)],
        "delete_all": ["e"],
        "increment": [("n", 3)],
    }
    sdk_update = bytes(B.serialize_for_update_row([("pk", 1)], update))
    ops = m.CellOp
    decoded = decode_row(sdk_update)
    assert decoded is not None
    assert set(decoded.columns) == {
        m.Column("p", 1),
        m.Column("q", "x", NOW_MS),
        m.Column("d", None, NOW_MS, ops.DELETE_ONE_VERSION),
        m.Column("e", None, None, ops.DELETE_ALL_VERSIONS),
        m.Column("n", 3, None, ops.INCREMENT),
    }, decoded.columns
    assert encode_row(decoded) == sdk_update
    for filter_value in (5, -7, 2.5, True, "ab", bytearray(b"\x00\x01")):
        assert bytes(B.serialize_column_value(filter_value)) == encode_sql_variant(ours(filter_value))
    facts["codec_rows_compared"] = checked


print(json.dumps({"steps": results, "facts": facts}))
