"""Property: no request, however malformed, gets a 5xx or changes data it was not about.

For every endpoint a valid, signed request (against a scratch table and tunnel) is mutated by hypothesis:
bytes flipped, inserted or cut, text fields made non-UTF-8, lengths, headers (date, signature, MD5, missing),
framing (chunked bodies, other HTTP methods with a body). Each answer must be below 500 and, if an error, a
protobuf ``Error`` with a code and a request id; after every request the protected table (every row and
version), its tunnel and that tunnel's checkpoints must be exactly as before, and the emulator must answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_tablestore.emulator.codec.encode import encode_primary_key, encode_row
from airflow_tablestore.emulator.codec.format import INF_MAX, INF_MIN
from airflow_tablestore.emulator.testing import EmulatorProcess
from airflow_tablestore.protocol import ots_table_pb2 as _table_pb2
from airflow_tablestore.protocol import ots_tunnel_pb2 as _tunnel_pb2
from testing.emulator_http import Http, signed_headers

table_pb2: Any = _table_pb2
tunnel_pb2: Any = _tunnel_pb2

KEEP, SCRATCH = "keep_table", "scratch_table"


@pytest.fixture(scope="module")
def emu() -> Iterator[EmulatorProcess]:
    with EmulatorProcess(extra_args=["--stream-partitions", "2", "--base-channel-rows", "5",
                                     "--max-read-records", "7", "--log-level", "ERROR"]) as proc:
        yield proc


@dataclass
class World:
    http: Http
    corpus: dict[str, bytes]
    keep_tunnel: tuple[str, str, list[str]]  # tunnel id, client id, channel ids

    def fingerprint(self) -> Any:
        """Everything the protected table and tunnel hold, as comparable values."""
        req = table_pb2.GetRangeRequest(table_name=KEEP, direction=0, max_versions=10,
                                        inclusive_start_primary_key=_inf("min"), exclusive_end_primary_key=_inf("max"))
        resp = self.http.call("/GetRange", req, table_pb2.GetRangeResponse)
        assert not resp.HasField("next_start_primary_key")  # 20 rows: one page
        rows = resp.rows
        tunnel = self.http.tunnel()
        tunnel_id, client_id, channels = self.keep_tunnel
        checkpoints = [tunnel.get_checkpoint(tunnel_id, client_id, c) for c in channels]
        names = sorted(self.http.call("/ListTable", table_pb2.ListTableRequest(),
                                      table_pb2.ListTableResponse).table_names)
        return rows, checkpoints, KEEP in names, [t.tunnel_name for t in tunnel.list_tunnels(KEEP)]


def _inf(which: str) -> bytes:
    return encode_primary_key([("pk", INF_MIN if which == "min" else INF_MAX)])


def _valid_requests(http: Http) -> dict[str, bytes]:
    """One valid request body per endpoint, all aimed at the scratch table and its tunnel."""
    http.create_table(SCRATCH)
    http.write(SCRATCH, {i: f"s{i}" for i in range(12)})
    tunnel = http.tunnel()
    tid = tunnel.create(SCRATCH, "scratch_tunnel")
    cid = tunnel.connect(tid, timeout=3600)
    channel = sorted(tunnel.heartbeat(tid, cid))[0]
    token, seq = tunnel.get_checkpoint(tid, cid, channel)
    stream_id = http.call("/ListStream", table_pb2.ListStreamRequest(table_name=SCRATCH),
                          table_pb2.ListStreamResponse).streams[0].stream_id
    row = encode_row([("pk", 1)], [("col", "x", None, None)])
    pk = encode_row([("pk", 1)], [])
    cu = table_pb2.CapacityUnit(read=0, write=0)
    shard = http.call("/DescribeStream", table_pb2.DescribeStreamRequest(stream_id=stream_id),
                      table_pb2.DescribeStreamResponse).shards[0].shard_id
    iterator = http.call("/GetShardIterator", table_pb2.GetShardIteratorRequest(stream_id=stream_id, shard_id=shard),
                         table_pb2.GetShardIteratorResponse).shard_iterator
    messages: dict[str, Any] = {
        "/CreateTable": table_pb2.CreateTableRequest(
            table_meta=table_pb2.TableMeta(table_name="fuzz_new",
                                           primary_key=[table_pb2.PrimaryKeySchema(name="pk", type=1)]),
            reserved_throughput=table_pb2.ReservedThroughput(capacity_unit=cu),
            table_options=table_pb2.TableOptions(time_to_live=-1, max_versions=1)),
        "/ListTable": table_pb2.ListTableRequest(),
        "/DeleteTable": table_pb2.DeleteTableRequest(table_name="fuzz_new"),
        "/UpdateTable": table_pb2.UpdateTableRequest(table_name=SCRATCH,
                                                     table_options=table_pb2.TableOptions(max_versions=2)),
        "/DescribeTable": table_pb2.DescribeTableRequest(table_name=SCRATCH),
        "/ComputeSplitPointsBySize": table_pb2.ComputeSplitPointsBySizeRequest(table_name=SCRATCH, split_size=1),
        "/GetRow": table_pb2.GetRowRequest(table_name=SCRATCH, primary_key=pk, max_versions=1),
        "/PutRow": table_pb2.PutRowRequest(table_name=SCRATCH, row=row, condition=table_pb2.Condition(row_existence=0)),
        "/UpdateRow": table_pb2.UpdateRowRequest(table_name=SCRATCH, row_change=row,
                                                 condition=table_pb2.Condition(row_existence=0)),
        "/DeleteRow": table_pb2.DeleteRowRequest(table_name=SCRATCH, primary_key=encode_row(
            [("pk", 2)], [], delete_marker=True), condition=table_pb2.Condition(row_existence=0)),
        "/BatchGetRow": table_pb2.BatchGetRowRequest(tables=[table_pb2.TableInBatchGetRowRequest(
            table_name=SCRATCH, primary_key=[pk], max_versions=1)]),
        "/BatchWriteRow": table_pb2.BatchWriteRowRequest(tables=[table_pb2.TableInBatchWriteRowRequest(
            table_name=SCRATCH, rows=[table_pb2.RowInBatchWriteRowRequest(
                type=1, row_change=row, condition=table_pb2.Condition(row_existence=0))])]),
        "/GetRange": table_pb2.GetRangeRequest(table_name=SCRATCH, direction=0, max_versions=1,
                                               inclusive_start_primary_key=_inf("min"),
                                               exclusive_end_primary_key=_inf("max")),
        "/ListStream": table_pb2.ListStreamRequest(table_name=SCRATCH),
        "/DescribeStream": table_pb2.DescribeStreamRequest(stream_id=stream_id),
        "/GetShardIterator": table_pb2.GetShardIteratorRequest(stream_id=stream_id, shard_id=shard),
        "/GetStreamRecord": table_pb2.GetStreamRecordRequest(shard_iterator=iterator),
        "/tunnel/create": tunnel_pb2.CreateTunnelRequest(tunnel=tunnel_pb2.Tunnel(
            table_name=SCRATCH, tunnel_name="fuzz_tunnel", tunnel_type=3)),
        "/tunnel/list": tunnel_pb2.ListTunnelRequest(table_name=SCRATCH),
        "/tunnel/describe": tunnel_pb2.DescribeTunnelRequest(table_name=SCRATCH, tunnel_name="scratch_tunnel"),
        "/tunnel/delete": tunnel_pb2.DeleteTunnelRequest(table_name=SCRATCH, tunnel_name="fuzz_tunnel"),
        "/tunnel/connect": tunnel_pb2.ConnectRequest(tunnel_id=tid, client_config=tunnel_pb2.ClientConfig(
            timeout=3600, client_tag="fuzz")),
        "/tunnel/heartbeat": tunnel_pb2.HeartbeatRequest(tunnel_id=tid, client_id=cid),
        "/tunnel/shutdown": tunnel_pb2.ShutdownRequest(tunnel_id=tid, client_id="no-such-client"),
        "/tunnel/getcheckpoint": tunnel_pb2.GetCheckpointRequest(tunnel_id=tid, client_id=cid, channel_id=channel),
        "/tunnel/checkpoint": tunnel_pb2.CheckpointRequest(tunnel_id=tid, client_id=cid, channel_id=channel,
                                                           checkpoint=token, sequence_number=seq + 1),
        "/tunnel/readrecords": tunnel_pb2.ReadRecordsRequest(tunnel_id=tid, client_id=cid, channel_id=channel,
                                                             token=token),
        "/tunnel/schedule": tunnel_pb2.ScheduleRequest(tunnel_id=tid),
    }
    return {uri: msg.SerializeToString() for uri, msg in messages.items()}


@pytest.fixture(scope="module")
def world(emu: EmulatorProcess) -> World:
    http = Http(emu)
    http.create_table(KEEP)
    http.write(KEEP, {i: f"k{i}" for i in range(20)})
    tunnel = http.tunnel()
    tid = tunnel.create(KEEP, "keep_tunnel")
    cid = tunnel.connect(tid, timeout=3600)
    channels = sorted(tunnel.heartbeat(tid, cid))
    token, seq = tunnel.get_checkpoint(tid, cid, channels[0])
    first = tunnel.read(tid, cid, channels[0], token)
    tunnel.checkpoint(tid, cid, channels[0], first.next_token, seq + 1)  # a checkpoint worth protecting
    return World(http, _valid_requests(http), (tid, cid, channels))


def test_every_endpoint_is_in_the_corpus(world: World, tmp_path: Any) -> None:
    from airflow_tablestore.emulator.config import EmulatorConfig
    from airflow_tablestore.emulator.server import Emulator

    emulator = Emulator(EmulatorConfig(), str(tmp_path))
    try:
        assert set(emulator.handlers) == set(world.corpus)
    finally:
        emulator.httpd.server_close()
        emulator.store.close()


# -- mutations --------------------------------------------------------------------------------------------

@st.composite
def mutated_body(draw: st.DrawFn, body: bytes) -> bytes:
    kind = draw(st.sampled_from(["flip", "insert", "cut", "random", "poison_text", "grow_length", "valid"]))
    data = bytearray(body)
    if kind == "flip" and data:
        for _ in range(draw(st.integers(1, 4))):
            data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
    elif kind == "insert":
        at = draw(st.integers(0, len(data)))
        data[at:at] = draw(st.binary(min_size=1, max_size=64))
    elif kind == "cut" and data:
        at = draw(st.integers(0, len(data) - 1))
        del data[at:at + draw(st.integers(1, 16))]
    elif kind == "random":
        data = bytearray(draw(st.binary(max_size=512)))
    elif kind == "poison_text":
        for name in (SCRATCH.encode(), b"scratch_tunnel", b"fuzz_new", b"fuzz_tunnel", b"col"):
            if name in data:
                data = bytearray(bytes(data).replace(name, b"\xff\xfe" + name[2:], 1))
                break
    elif kind == "grow_length" and len(data) > 1:
        data[1] = min(255, data[1] + draw(st.integers(1, 200)))  # the first field's length prefix, usually
    return bytes(data)


@st.composite
def header_change(draw: st.DrawFn) -> tuple[str, str | None]:
    return draw(st.sampled_from([
        ("none", None), ("none", None), ("none", None),
        ("x-ots-date", "2026-13-45T99:99:99.000Z"), ("x-ots-date", "1" * 3000),
        ("x-ots-date", "2026-01-01T00:00:00." + "9" * 2000 + "Z"),
        ("x-ots-signature", "\u00e9" * 28), ("x-ots-signature", ""), ("x-ots-contentmd5", "AAAA"),
        ("x-ots-instancename", "\u00ff" * 300), ("x-ots-accesskeyid", None), ("x-ots-apiversion", None),
    ]))


def _signed(emu: EmulatorProcess, uri: str, body: bytes, change: tuple[str, str | None]) -> dict[str, str]:
    name, value = change
    if name == "none":
        return signed_headers(emu, uri, body)
    if name == "x-ots-signature":
        return signed_headers(emu, uri, body, signature=value)
    return signed_headers(emu, uri, body, {name: value})


URIS = sorted([
    "/BatchGetRow", "/BatchWriteRow", "/ComputeSplitPointsBySize", "/CreateTable", "/DeleteRow", "/DeleteTable",
    "/DescribeStream", "/DescribeTable", "/GetRange", "/GetRow", "/GetShardIterator", "/GetStreamRecord",
    "/ListStream", "/ListTable", "/PutRow", "/UpdateRow", "/UpdateTable", "/tunnel/checkpoint", "/tunnel/connect",
    "/tunnel/create", "/tunnel/delete", "/tunnel/describe", "/tunnel/getcheckpoint", "/tunnel/heartbeat",
    "/tunnel/list", "/tunnel/readrecords", "/tunnel/schedule", "/tunnel/shutdown",
])


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_no_request_breaks_the_emulator(emu: EmulatorProcess, world: World, data: st.DataObject) -> None:
    uri = data.draw(st.sampled_from(URIS))
    body = data.draw(mutated_body(world.corpus[uri]))
    change = data.draw(header_change())
    method = data.draw(st.sampled_from(["POST"] * 8 + ["GET", "PUT", "OPTIONS", "DELETE"]))
    chunked = data.draw(st.booleans())
    before = world.fingerprint()
    payload: Any = iter([body[: len(body) // 2], body[len(body) // 2:]]) if chunked and method == "POST" else body
    try:
        resp = world.http.session.request(method, emu.endpoint + uri, data=payload,
                                          headers=_signed(emu, uri, body, change), timeout=60)
    except UnicodeEncodeError:  # requests itself refuses a header value it cannot encode; nothing was sent
        return
    assert resp.status_code < 500, (uri, resp.status_code, resp.content[:300])
    if resp.status_code >= 400:
        assert resp.headers.get("x-ots-requestid")
        assert table_pb2.Error.FromString(resp.content).code
    assert world.fingerprint() == before, f"{method} {uri} changed the protected table or tunnel"


def test_the_emulator_still_answers_cleanly_after_the_fuzzing(world: World, emu: EmulatorProcess) -> None:
    world.fingerprint()
    assert requests.post(emu.endpoint + "/ListTable", data=b"", headers=_signed(emu, "/ListTable", b"", ("none", None)),
                         timeout=30).status_code == 200
