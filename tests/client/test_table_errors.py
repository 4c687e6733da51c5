"""TableClient error paths: typed errors with code, status and request id; no secrets; no silent loss."""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_tablestore.client import (
    INF_MAX,
    INF_MIN,
    AlreadyExistsError,
    AuthError,
    BatchWriteError,
    Column,
    Condition,
    Direction,
    InvalidParameterError,
    NotFoundError,
    PrimaryKeyColumn,
    PrimaryKeyType,
    RetryPolicy,
    RowExistence,
    RowWrite,
    RowWriteResult,
    ServerError,
    TableClient,
    TableSchema,
    TablestoreClientError,
    TablestoreError,
    WriteType,
)
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2

table_pb2: Any = _table_pb2  # generated code has no type stubs
PK = (PrimaryKeyColumn("k", PrimaryKeyType.STRING), PrimaryKeyColumn("n", PrimaryKeyType.INTEGER))


@pytest.fixture()
def table(table_client: TableClient, unique_name: str) -> str:
    table_client.create_table(TableSchema(unique_name, PK))
    return unique_name


@pytest.fixture()
def control(tablestore_emulator: Any) -> Iterator[Any]:
    ctl = tablestore_emulator.control
    try:
        yield ctl
    finally:
        ctl.clear_faults()
        ctl.close()


def _assert_service_error(error: TablestoreError, code: str, status: int) -> None:
    assert error.code == code
    assert error.http_status == status
    assert error.request_id
    assert error.message


# ---- authentication -------------------------------------------------------------------------------


def test_wrong_secret_is_auth_failed_and_never_leaks(
    tablestore_emulator: Any, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "Wrong-Secret-Do-Not-Print-9f8e7d"
    token = "Sts-Token-Do-Not-Print-1a2b3c"
    kwargs = dict(tablestore_emulator.client_kwargs, access_key_secret=secret)
    with caplog.at_level(logging.DEBUG), TableClient(**kwargs, sts_token=token) as client:
        with pytest.raises(AuthError) as info:
            client.list_tables()
        texts = [str(info.value), repr(info.value), repr(client), repr(client.transport.credentials)]
    _assert_service_error(info.value, "OTSAuthFailed", 403)
    texts.append(caplog.text)
    for text in texts:
        assert secret not in text and token not in text


def test_unknown_access_key_id(tablestore_emulator: Any) -> None:
    kwargs = dict(tablestore_emulator.client_kwargs, access_key_id="nobody")
    with TableClient(**kwargs) as client, pytest.raises(AuthError) as info:
        client.list_tables()
    _assert_service_error(info.value, "OTSAuthFailed", 403)


def test_unknown_instance(tablestore_emulator: Any) -> None:
    kwargs = dict(tablestore_emulator.client_kwargs, instance_name="no-such-instance")
    with TableClient(**kwargs) as client, pytest.raises(TablestoreError) as info:
        client.list_tables()
    assert info.value.http_status is not None and 400 <= info.value.http_status < 500
    assert info.value.request_id


def test_errors_are_picklable(table_client: TableClient) -> None:
    with pytest.raises(NotFoundError) as info:
        table_client.describe_table("does_not_exist_at_all")
    clone = pickle.loads(pickle.dumps(info.value))
    assert type(clone) is NotFoundError
    assert (clone.code, clone.http_status, clone.request_id) == (
        "OTSObjectNotExist",
        404,
        info.value.request_id,
    )
    # client-side errors too (their message comes first): a network error, a lost tunnel session
    from airflow_tablestore.client.errors import TablestoreNetworkError
    from airflow_tablestore.client.tunnel.session import SessionLostError

    for error in (TablestoreNetworkError("connection refused"), SessionLostError("client c-1 lost")):
        clone = pickle.loads(pickle.dumps(error))
        assert type(clone) is type(error) and (clone.code, clone.message) == (error.code, error.message)


# ---- names, schema and limits ---------------------------------------------------------------------


def test_missing_table_everywhere(table_client: TableClient) -> None:
    missing = "no_such_table_here"
    calls = [
        lambda: table_client.describe_table(missing),
        lambda: table_client.delete_table(missing),
        lambda: table_client.get_row(missing, [("k", "a"), ("n", 1)]),
        lambda: table_client.put_row(missing, [("k", "a"), ("n", 1)], {"v": 1}),
        lambda: table_client.get_range(
            missing, [("k", INF_MIN), ("n", INF_MIN)], [("k", INF_MAX), ("n", INF_MAX)]
        ),
    ]
    for call in calls:
        with pytest.raises(NotFoundError) as info:
            call()
        _assert_service_error(info.value, "OTSObjectNotExist", 404)
        # the service does not name the table; the error does, on its first line (a job may read several)
        assert str(info.value).startswith(f"OTSObjectNotExist: Requested table does not exist: {missing!r}")
        assert info.value.request_id and pickle.loads(pickle.dumps(info.value)).message == info.value.message


def test_create_existing_table(table_client: TableClient, table: str) -> None:
    with pytest.raises(AlreadyExistsError) as info:
        table_client.create_table(TableSchema(table, PK))
    _assert_service_error(info.value, "OTSObjectAlreadyExist", 409)


@pytest.mark.parametrize("name", ["1starts_with_digit", "has-dash", "x" * 256])
def test_invalid_table_name(table_client: TableClient, name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        table_client.create_table(TableSchema(name, PK))
    _assert_service_error(info.value, "OTSParameterInvalid", 400)


def test_empty_table_name_is_rejected_client_side(table_client: TableClient) -> None:
    with pytest.raises(TablestoreClientError, match="table name"):
        table_client.get_row("", [("k", "a")])
    with pytest.raises(TablestoreClientError, match="table name"):
        table_client.create_table(TableSchema("", PK))


def test_invalid_column_name(table_client: TableClient, table: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        table_client.put_row(table, [("k", "a"), ("n", 1)], {"bad-name": 1})
    _assert_service_error(info.value, "OTSParameterInvalid", 400)


@pytest.mark.parametrize("pk", [
    [("n", 1), ("k", "a")],           # wrong order
    [("k", "a")],                     # too few
    [("k", "a"), ("n", "not-int")],   # wrong type
    [("k", "a"), ("other", 1)],       # wrong name
])
def test_primary_key_schema_mismatch(
    table_client: TableClient, table: str, pk: list[tuple[str, Any]]
) -> None:
    with pytest.raises(InvalidParameterError) as info:
        table_client.put_row(table, pk, {"v": 1})
    _assert_service_error(info.value, "OTSInvalidPK", 400)
    with pytest.raises(InvalidParameterError) as info:
        table_client.get_row(table, pk)
    assert info.value.code == "OTSInvalidPK"


def test_oversized_values(table_client: TableClient, table: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        table_client.put_row(table, [("k", "x" * 1025), ("n", 1)], {"v": 1})
    _assert_service_error(info.value, "OTSParameterInvalid", 400)
    with pytest.raises(InvalidParameterError) as info:
        table_client.put_row(table, [("k", "a"), ("n", 1)], {"v": b"\x00" * (2 * 1024 * 1024 + 1)})
    _assert_service_error(info.value, "OTSParameterInvalid", 400)
    assert table_client.get_row(table, [("k", "a"), ("n", 1)]) is None


def test_too_many_rows_rejected_client_side_and_by_server(table_client: TableClient, table: str) -> None:
    writes = [RowWrite(table, WriteType.PUT, (("k", "a"), ("n", i)), (Column("v", i),)) for i in range(201)]
    with pytest.raises(TablestoreClientError, match="at most 200"):
        table_client.batch_write_row(writes)
    with pytest.raises(TablestoreClientError, match="at most 100"):
        table_client.batch_get_row(table, [[("k", "a"), ("n", i)] for i in range(101)])
    # The server enforces the same limit when a request bypasses the client-side check.
    request = table_pb2.BatchWriteRowRequest()
    item = request.tables.add(table_name=table)
    from airflow_tablestore.client.model import Row
    from airflow_tablestore.client.plainbuffer.encode import encode_row

    for i in range(201):
        item.rows.add(type=1, row_change=encode_row(Row((("k", "a"), ("n", i)), (Column("v", i),))),
                      condition=table_pb2.Condition(row_existence=0))
    with pytest.raises(InvalidParameterError) as info:
        table_client.transport.call(
            "/BatchWriteRow", request, table_pb2.BatchWriteRowResponse, idempotent=False
        )
    _assert_service_error(info.value, "OTSParameterInvalid", 400)


def test_bad_ranges(table_client: TableClient, table: str) -> None:
    key = [("k", "a"), ("n", 1)]
    with pytest.raises(InvalidParameterError):
        table_client.get_range(table, key, key)
    with pytest.raises(InvalidParameterError):
        table_client.get_range(table, [("k", "b"), ("n", 1)], key)  # start > end going forward
    with pytest.raises(InvalidParameterError):
        table_client.get_range(table, key, [("k", "b"), ("n", 1)], direction=Direction.BACKWARD)
    with pytest.raises(TablestoreClientError, match="limit"):
        table_client.get_range(table, key, [("k", "b"), ("n", 1)], limit=0)


def test_batch_write_surfaces_a_failing_row(table_client: TableClient, table: str) -> None:
    writes = [
        RowWrite(table, WriteType.PUT, (("k", "a"), ("n", 1)), (Column("v", 1),)),
        RowWrite(table, WriteType.UPDATE, (("n", 2), ("k", "a")), (Column("v", 2),)),  # PK order wrong
        RowWrite(table, WriteType.PUT, (("k", "a"), ("n", 3)), (Column("v", 3),)),
    ]
    results = table_client.batch_write_row(writes)
    assert [r.ok for r in results] == [True, False, True]
    assert getattr(results[1].error, "code", None) == "OTSInvalidPK"
    with pytest.raises(BatchWriteError) as info:
        table_client.write_rows(writes)
    assert [f.index for f in info.value.failures] == [1]
    assert info.value.written == 2
    # a row the service refuses for good is not retried, and the message does not say it was
    assert info.value.failures[0].attempts == 1
    assert str(info.value).startswith("OTSBatchWritePartialFailure: 1 of 3 row(s) failed (OTSInvalidPK); 2 written.")


def test_write_rows_request_failure_lists_every_row(table_client: TableClient) -> None:
    writes = [RowWrite("no_such_table_for_writes", WriteType.PUT, (("k", "a"), ("n", i)), (Column("v", i),))
              for i in range(250)]
    with pytest.raises(BatchWriteError) as info:
        table_client.write_rows(writes)
    error = info.value
    assert len(error.failures) == 200
    assert all(getattr(f.error, "code", None) == "OTSObjectNotExist" for f in error.failures)
    assert error.not_attempted == 50
    assert isinstance(error.__cause__, NotFoundError)


# ---- retries against injected faults --------------------------------------------------------------


def test_throttled_write_is_retried(table_client: TableClient, table: str, control: Any) -> None:
    control.add_fault("/PutRow", "OTSServerBusy", status=503, count=2)
    table_client.put_row(table, [("k", "a"), ("n", 1)], {"v": 1})
    row = table_client.get_row(table, [("k", "a"), ("n", 1)])
    assert row is not None and row.get("v") == 1
    assert control.state()["faults"] == []


def test_server_error_retried_for_reads_not_writes(
    table_client: TableClient, table: str, control: Any
) -> None:
    control.add_fault(
        "/PutRow", "OTSInternalServerError", status=500, message="Internal server error.", count=1
    )
    with pytest.raises(ServerError) as info:
        table_client.put_row(table, [("k", "a"), ("n", 1)], {"v": 1})
    _assert_service_error(info.value, "OTSInternalServerError", 500)
    control.add_fault(
        "/GetRow", "OTSInternalServerError", status=500, message="Internal server error.", count=2
    )
    assert table_client.get_row(table, [("k", "a"), ("n", 1)]) is None
    assert control.state()["faults"] == []


def test_throttling_exhausts_attempts(tablestore_emulator: Any, table: str, control: Any) -> None:
    control.add_fault("/GetRow", "OTSServerBusy", status=503, count=10)
    policy = RetryPolicy(max_attempts=3, base_delay_s=0.0, throttle_base_delay_s=0.0)
    with (
        TableClient(**tablestore_emulator.client_kwargs, retry=policy) as client,
        pytest.raises(TablestoreError) as info,
    ):
        client.get_row(table, [("k", "a"), ("n", 1)])
    assert info.value.code == "OTSServerBusy"
    assert control.state()["faults"][0]["count"] == 7


def test_write_rows_retries_only_failed_retryable_rows(scripted: Any) -> None:
    def answer(*oks: bool) -> bytes:
        response = table_pb2.BatchWriteRowResponse()
        item = response.tables.add(table_name="t")
        for ok in oks:
            row = item.rows.add(is_ok=ok)
            if ok:
                row.consumed.capacity_unit.read = 0
                row.consumed.capacity_unit.write = 1
            else:
                row.error.code = "OTSServerBusy"
                row.error.message = "Server is busy."
        return bytes(response.SerializeToString())

    scripted.script(
        scripted.Reply(200, answer(True, False, True, False)),
        scripted.Reply(200, answer(True, False)),
        scripted.Reply(200, answer(False)),
    )
    writes = [RowWrite("t", WriteType.PUT, (("id", i),), (Column("v", i),)) for i in range(4)]
    policy = RetryPolicy(base_delay_s=0.0, throttle_base_delay_s=0.0)
    with TableClient(scripted.endpoint, "id", "secret", "inst", retry=policy) as client, \
            pytest.raises(BatchWriteError) as info:
        client.write_rows(writes, max_attempts=3)
    sent = [table_pb2.BatchWriteRowRequest.FromString(seen.body) for seen in scripted.requests]
    assert [len(req.tables[0].rows) for req in sent] == [4, 2, 1]
    assert [f.index for f in info.value.failures] == [3]
    assert getattr(info.value.failures[0].error, "code", None) == "OTSServerBusy"
    assert info.value.written == 3
    assert info.value.failures[0].attempts == 3
    assert "1 of 4 row(s) failed (OTSServerBusy, 1 of them after retries)" in str(info.value)


def test_batch_write_error_pickles_with_its_counts() -> None:
    failure = RowWriteResult(RowWrite("t", WriteType.DELETE, (("k", "a"),)), 3, False,
                             error=InvalidParameterError("OTSInvalidPK", "bad", None, "rid"))
    error = BatchWriteError("1 failed", [failure], written=7, not_attempted=2)
    clone = pickle.loads(pickle.dumps(error))
    assert (clone.written, clone.not_attempted, clone.message) == (7, 2, "1 failed")
    assert clone.failures[0].index == 3 and getattr(clone.failures[0].error, "code", None) == "OTSInvalidPK"


def test_write_rows_resends_repeatable_batches_after_server_errors(table_client: TableClient, table: str,
                                                                   control: Any) -> None:
    plain = [RowWrite(table, WriteType.PUT, (("k", "p"), ("n", i)), (Column("v", i),)) for i in range(5)]
    control.add_fault(
        "/BatchWriteRow", "OTSInternalServerError", status=500, message="Internal server error."
    )
    assert table_client.write_rows(plain) == 5
    assert control.state()["faults"] == []
    guarded = [RowWrite(table, WriteType.PUT, (("k", "g"), ("n", i)), (Column("v", i),),
                        Condition(RowExistence.EXPECT_NOT_EXIST)) for i in range(5)]
    control.add_fault(
        "/BatchWriteRow", "OTSInternalServerError", status=500, message="Internal server error."
    )
    with pytest.raises(BatchWriteError) as info:
        table_client.write_rows(guarded)  # conditional writes are not repeatable: reported, not re-sent
    assert len(info.value.failures) == 5 and info.value.written == 0
    assert isinstance(info.value.__cause__, ServerError)
