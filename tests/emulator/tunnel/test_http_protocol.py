"""Tunnel protocol over real HTTP against an emulator process: flow, errors, rebalancing, splits, offsets."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from airflow_tablestore.emulator.testing import EmulatorProcess
from testing.emulator_http import Http, tunnel_pb2
from testing.emulator_tunnel import (
    CLOSE,
    CLOSING,
    FINISHED,
    OPEN,
    TERMINATED,
    CallError,
    SimWorker,
    Tunnel,
    decode_pk_col,
)


def _apply(state: dict[int, str | None], records: list[tuple[int, bytes]]) -> None:
    for action, rec in records:
        pk, value = decode_pk_col(rec)
        if action == 3:
            state.pop(pk, None)
        else:
            state[pk] = value


def _run_until_idle(workers: list[SimWorker], rounds: int = 12) -> None:
    for _ in range(rounds):
        for w in workers:
            w.beat()
            w.work()


def _channel_map(desc: Any) -> dict[str, Any]:
    return {c.channel_id: c for c in desc.channels}


def test_full_flow_base_then_stream_replays_table_exactly(http: Http, table: str) -> None:
    http.write_many(table, {i: f"v{i}" for i in range(33)})
    t = http.tunnel()
    tid = t.create(table, "full", 3)
    http.write(table, {5: "five", 200: "new"}, deletes=[6, 7])
    http.write(table, {6: "back"})

    w = SimWorker(t, tid, "w1")
    desc = t.describe(table, "full")
    assert desc.tunnel.tunnel_type == "BaseAndStream" and desc.tunnel.stage == "ProcessBaseData"
    assert desc.tunnel_rpo == 0 and desc.tunnel.expired is False
    assert desc.tunnel.create_time > 1_600_000_000 * 10**9  # nanoseconds

    _run_until_idle([w], rounds=4)
    desc = t.describe(table, "full")
    assert desc.tunnel.stage == "ProcessStream"
    chans = _channel_map(desc)
    base = [c for c in chans.values() if c.channel_type == "BaseData"]
    assert len(base) == 4 and all(c.channel_status == "TERMINATED" and c.channel_rpo == 0 for c in base)
    assert sum(c.channel_count for c in base) == 33
    stream = [c for c in chans.values() if c.channel_type == "Stream"]
    assert len(stream) == 2 and all(c.channel_status == "OPEN" and c.client_id == w.client_id for c in stream)
    assert sum(c.channel_count for c in stream) == 5
    assert desc.tunnel_rpo > desc.tunnel.create_time  # idle heads checkpointed "now"

    state: dict[int, str | None] = {}
    for cid in sorted(w.records, key=lambda c: (not c.startswith("BaseData"), c)):
        _apply(state, w.records[cid])
    expected: dict[int, str | None] = {i: f"v{i}" for i in range(33)}
    expected.update({5: "five", 200: "new", 6: "back"})
    expected.pop(7)
    assert state == expected

    w_rpo = desc.tunnel_rpo
    http.write(table, {300: "later"})
    w.beat()
    w.work()
    desc = t.describe(table, "full")
    assert desc.tunnel_rpo > w_rpo
    assert sum(c.channel_count for c in desc.channels if c.channel_type == "Stream") == 6
    t.shutdown(tid, w.client_id)
    desc = t.describe(table, "full")
    assert all(c.channel_status in ("CLOSE", "TERMINATED") for c in desc.channels)
    assert all(c.client_id == "" for c in desc.channels)


def test_errors_get_reference_codes_and_lose_nothing(http: Http, table: str) -> None:
    http.write_many(table, {i: "x" for i in range(12)})
    t = http.tunnel()
    tid = t.create(table, "errs", 1)
    with pytest.raises(CallError) as err:
        t.create(table, "errs", 1)
    assert (err.value.status, err.value.code) == (409, "OTSTunnelExist")
    with pytest.raises(CallError) as err:
        t.create(f"{table}-missing", "x", 1)
    assert (err.value.status, err.value.code) == (400, "OTSParameterInvalid")
    plain = http.create_table(f"{table}p", stream=False)
    with pytest.raises(CallError) as err:
        t.create(plain, "s", 2)
    assert err.value.code == "OTSParameterInvalid" and "stream" in err.value.message
    with pytest.raises(CallError) as err:
        t.describe(table, "nope")
    assert (err.value.status, err.value.code, err.value.message) == (400, "OTSParameterInvalid", "tunnel not exist")
    with pytest.raises(CallError) as err:
        t.delete(table, "nope")
    assert "tunnel not exist" in err.value.message

    for body in (b"\xff\xff\xff", b""):
        resp = http.post_raw("/tunnel/connect", body)
        assert resp.status_code == 400 and resp.headers["x-ots-requestid"]

    a = t.connect(tid, tag="a")
    chans = t.heartbeat(tid, a)
    b = t.connect(tid, tag="b")  # joins later: the fair share would move one channel only on a's next beat
    assert len(chans) == 2 and all(s == OPEN for _, s in chans.values())
    ch = sorted(chans)[0]
    token, seq = t.get_checkpoint(tid, a, ch)
    first = t.read(tid, a, ch, token)
    t.checkpoint(tid, a, ch, first.next_token, seq + 1)

    with pytest.raises(CallError) as err:  # stale sequence number
        t.checkpoint(tid, a, ch, first.next_token, seq + 1)
    assert (err.value.status, err.value.code) == (400, "OTSSequenceNumberNotMatch")
    with pytest.raises(CallError) as err:  # wrong owner
        t.read(tid, b, ch, first.next_token)
    assert (err.value.status, err.value.code) == (410, "OTSResourceGone")
    with pytest.raises(CallError) as err:
        t.checkpoint(tid, b, ch, FINISHED, 99)
    assert (err.value.status, err.value.code) == (410, "OTSResourceGone")
    with pytest.raises(CallError) as err:  # unknown client
        t.heartbeat(tid, "ghost-client")
    assert (err.value.status, err.value.code) == (410, "OTSResourceGone")
    with pytest.raises(CallError) as err:
        t.read(tid, a, ch, FINISHED)
    assert (err.value.status, err.value.code) == (400, "OTSParameterInvalid")
    with pytest.raises(CallError) as err:
        t.read(tid, a, ch, "not-a-token")
    assert err.value.code == "OTSParameterInvalid"
    with pytest.raises(CallError) as err:
        t.read(tid, a, "BaseData_99", token)
    assert err.value.code == "OTSParameterInvalid"
    with pytest.raises(CallError) as err:
        t.get_checkpoint("no-such-tunnel", a, ch)
    assert err.value.message == "tunnel not exist"

    # nothing lost: the owner resumes from its checkpoint and gets every remaining row exactly once
    assert t.get_checkpoint(tid, a, ch) == (first.next_token, seq + 1)
    assert t.get_checkpoint(tid, b, ch) == (first.next_token, seq + 1)  # lenient for live clients
    rest, last = t.drain(tid, a, ch)
    assert last == FINISHED and len(first.records) + len(rest) == 10
    other = sorted(chans)[1]
    rows, last = t.drain(tid, a, other)
    assert last == FINISHED and len(rows) == 2
    assert t.get_checkpoint(tid, a, other)[0] == FINISHED
    counts = {c.channel_id: c.channel_count for c in t.describe(table, "errs").channels}
    assert counts == {ch: 10, other: 2}


def test_rebalancing_three_clients_keeps_ownership_exclusive(http: Http, table: str) -> None:
    http.write_many(table, {i: "x" for i in range(60)})  # 6 base channels
    t = http.tunnel()
    tid = t.create(table, "rb", 1)
    workers = [SimWorker(t, tid, "a")]
    workers[0].beat()
    assert len(workers[0].open_channels()) == 6
    workers += [SimWorker(t, tid, "b"), SimWorker(t, tid, "c")]
    for _ in range(4):
        for w in workers:
            w.beat()
            for x, y in itertools.combinations(workers, 2):
                assert not (x.open_channels() & y.open_channels())
    assert sorted(len(w.open_channels()) for w in workers) == [2, 2, 2]
    desc = t.describe(table, "rb")
    owners = {c.channel_id: c.client_id for c in desc.channels}
    for w in workers:
        assert {c for c, o in owners.items() if o == w.client_id} == w.open_channels()
    # a client leaves: its channels are spread over the two others
    t.shutdown(tid, workers[2].client_id)
    for _ in range(3):
        for w in workers[:2]:
            w.beat()
    assert sorted(len(w.open_channels()) for w in workers[:2]) == [3, 3]
    _run_until_idle(workers[:2], rounds=3)
    seen = [decode_pk_col(r)[0] for w in workers[:2] for recs in w.records.values() for _, r in recs]
    assert sorted(seen) == list(range(60))
    assert all(c.channel_status == "TERMINATED" for c in t.describe(table, "rb").channels)


def test_client_timeout_hands_channels_over(http: Http, emu: EmulatorProcess, table: str) -> None:
    http.write(table, {1: "a", 2: "b"})
    t = http.tunnel()
    tid = t.create(table, "to", 1)
    slow = SimWorker(t, tid, "slow", timeout=2)
    fast = SimWorker(t, tid, "fast", timeout=600)
    slow.beat()
    assert slow.open_channels()
    version = {c: v for c, (v, _) in slow.local.items()}
    emu.control.advance_time(5)
    got = fast.beat()
    assert set(got) == set(version)
    assert all(v == version[c] + 2 and s == OPEN for c, (v, s) in got.items())  # CLOSE (v+1) then OPEN (v+2)
    with pytest.raises(CallError) as err:
        slow.beat()
    assert (err.value.status, err.value.code) == (410, "OTSResourceGone")
    fast.work()
    assert sorted(decode_pk_col(r)[0] for recs in fast.records.values() for _, r in recs) == [1, 2]


def test_split_children_open_after_parent_terminates(http: Http, emu: EmulatorProcess, table: str) -> None:
    t = http.tunnel()
    tid = t.create(table, "split", 2)
    http.write_many(table, {i: f"a{i}" for i in range(40)})
    parts = emu.control.partitions(table)
    parent = parts[0]["partition_id"]
    emu.control.split_partition(table, parent)
    http.write_many(table, {i: f"b{i}" for i in range(40)})

    w = SimWorker(t, tid, "w")
    w.beat()
    desc = t.describe(table, "split")
    stream = {c.channel_id: c for c in desc.channels}
    assert len(stream) == 4
    children = [c for c in stream.values() if c.channel_status == "WAIT"]
    assert len(children) == 2  # children wait for their parent
    assert all(c.channel_id.count("_") == 1 for c in stream.values())
    parent_ch = next(c for c in w.open_channels() if c.startswith(parent.replace("_", "-")))
    w.work()
    assert w.local[parent_ch][1] == TERMINATED
    assert all(c.channel_status == "WAIT" for c in _channel_map(t.describe(table, "split")).values()
               if c.channel_id in {x.channel_id for x in children})
    w.beat()  # reports TERMINATED: children open now
    assert {c.channel_id for c in children} <= w.open_channels()
    assert _channel_map(t.describe(table, "split"))[parent_ch].channel_status == "TERMINATED"
    w.work()
    # every key's changes arrive in write order: a<i> before b<i>
    state: dict[int, str | None] = {}
    order = [parent_ch] + sorted(c for c in w.records if c != parent_ch)
    for cid in order:
        _apply(state, w.records[cid])
    assert state == {i: f"b{i}" for i in range(40)}
    per_key: dict[int, list[str | None]] = {}
    for cid in order:
        for _, rec in w.records[cid]:
            pk, value = decode_pk_col(rec)
            per_key.setdefault(pk, []).append(value)
    assert all(v == [f"a{k}", f"b{k}"] for k, v in per_key.items())


def test_stream_offsets_latest_earliest_start_end(http: Http, emu: EmulatorProcess, table: str) -> None:
    t = http.tunnel()
    http.write(table, {1: "old"})
    before_ns = emu.control.state()["now_us"] * 1000
    http.write(table, {2: "mid"})
    latest = t.create(table, "latest", 2, flag=0)
    earliest = t.create(table, "earliest", 2, flag=1)
    offset = t.create(table, "offset", 2, startOffset=before_ns)
    http.write(table, {3: "new"})
    end_ns = emu.control.state()["now_us"] * 1000
    http.write(table, {4: "after-end"})
    ended = t.create(table, "ended", 2, startOffset=before_ns, endOffset=end_ns)

    def keys(tid: str) -> tuple[list[int], SimWorker]:
        w = SimWorker(t, tid, "k")
        w.beat()
        w.work()
        return sorted(decode_pk_col(r)[0] for recs in w.records.values() for _, r in recs), w

    assert keys(latest)[0] == [3, 4]
    assert keys(earliest)[0] == [1, 2, 3, 4]
    assert keys(offset)[0] == [2, 3, 4]
    got, w = keys(ended)
    assert got == [2, 3]
    assert all(s == TERMINATED for _, s in w.local.values())  # backfill channels finish at endOffset
    infos = {i.tunnel_name: i for i in t.list_tunnels(table)}
    assert infos["ended"].stream_tunnel_config.endOffset == end_ns
    assert all(i.stage == "ProcessStream" and i.tunnel_type == "Stream" for i in infos.values())


def test_expired_tunnel(http: Http, emu: EmulatorProcess, table: str) -> None:
    t = http.tunnel()
    tid = t.create(table, "exp", 2)
    w = SimWorker(t, tid, "w")
    w.beat()
    http.write(table, {i: "x" for i in range(10)})
    emu.control.set_retention(table, 0.001)  # 3.6 s
    emu.control.advance_time(60)
    http.write(table, {i: "y" for i in range(10)})  # the unconsumed "x" records are trimmed now
    emu.control.trim(table)
    desc = t.describe(table, "exp")
    assert desc.tunnel.expired is True
    ch = sorted(w.open_channels())[0]
    token, _ = t.get_checkpoint(tid, w.client_id, ch)
    with pytest.raises(CallError) as err:
        t.read(tid, w.client_id, ch, token)
    assert (err.value.status, err.value.code) == (400, "OTSTunnelExpired")
    with pytest.raises(CallError) as err:
        t.connect(tid)
    assert (err.value.status, err.value.code) == (400, "OTSTunnelExpired")
    assert next(i for i in t.list_tunnels(table) if i.tunnel_name == "exp").expired


def test_schedule_suspend_resume(http: Http, table: str) -> None:
    http.write(table, {1: "a"})
    t = http.tunnel()
    tid = t.create(table, "sch", 1)
    w = SimWorker(t, tid, "w")
    w.beat()
    (ch,) = w.open_channels()
    t.schedule(tid, [(ch, CLOSING)])
    assert w.beat()[ch][1] == CLOSING
    w.beat()  # reports CLOSE
    assert w.beat() == {}  # suspended: not reassigned
    t.schedule(tid, [(ch, OPEN)])
    assert w.beat()[ch][1] == OPEN
    with pytest.raises(CallError):
        t.schedule(tid, [("BaseData_77", CLOSE)])


def test_restart_keeps_tunnels_channels_checkpoints_clients(tmp_path: Any) -> None:
    with EmulatorProcess(data_dir=tmp_path, extra_args=["--base-channel-rows", "10", "--max-read-records", "4",
                                                        "--stream-partitions", "2"]) as emu:
        http = Http(emu)
        table = http.create_table("persist")
        http.write_many(table, {i: "x" for i in range(15)})
        t = http.tunnel()
        tid = t.create(table, "p", 3)
        http.write(table, {100: "s"})
        w = SimWorker(t, tid, "w")
        w.beat()
        ch = sorted(w.open_channels())[0]
        token, seq = t.get_checkpoint(tid, w.client_id, ch)
        first = t.read(tid, w.client_id, ch, token)
        t.checkpoint(tid, w.client_id, ch, first.next_token, seq + 1)
        before = t.describe(table, "p")
        emu.restart()
        http = Http(emu)
        t = http.tunnel()
        w.tunnel = t
        assert t.describe(table, "p") == before
        assert t.get_checkpoint(tid, w.client_id, ch) == (first.next_token, seq + 1)
        assert w.beat() == {c: v for c, v in w.local.items()}
        _run_until_idle([w], rounds=4)
        rows = [r for cid, recs in w.records.items() for _, r in recs]
        assert len(first.records) + len(rows) == 16
        emu.kill()  # crash: state committed before must survive as well
        emu.start()
        t = Http(emu).tunnel()
        desc = t.describe(table, "p")
        assert desc.tunnel.stage == "ProcessStream"
        assert sum(c.channel_count for c in desc.channels) == 16


def test_tunnel_api_is_typed_tunnel_wrapper(http: Http) -> None:
    assert isinstance(http.tunnel(), Tunnel)


@pytest.mark.parametrize("op", ["create", "list", "describe", "delete", "connect", "heartbeat", "shutdown",
                                "getcheckpoint", "readrecords", "checkpoint", "schedule"])
def test_malformed_bodies_are_parameter_invalid(http: Http, op: str) -> None:
    resp = http.post_raw(f"/tunnel/{op}", b"\x0a\xff\xff\xff\xff\x0f")  # truncated length-delimited field
    assert resp.status_code == 400
    err = tunnel_pb2.Error()
    err.ParseFromString(resp.content)
    assert err.code == "OTSParameterInvalid" and err.message
    if op != "list":  # every other request has required fields: an empty body lacks them
        resp = http.post_raw(f"/tunnel/{op}", b"")
        err.ParseFromString(resp.content)
        assert (resp.status_code, err.code) == (400, "OTSParameterInvalid")


def test_concurrent_workers_deliver_every_row_once(emu: EmulatorProcess, table: str) -> None:
    import threading

    http = Http(emu)
    http.write_many(table, {i: "x" for i in range(80)})  # 8 base channels
    tid = http.tunnel().create(table, "conc", 1)
    workers = [SimWorker(Http(emu).tunnel(), tid, f"w{n}") for n in range(3)]
    errors: list[BaseException] = []

    def run(w: SimWorker) -> None:
        try:
            for _ in range(30):
                w.beat()
                w.work()
                if not w.local:
                    desc = w.tunnel.describe(table, "conc")
                    if all(c.channel_status == "TERMINATED" for c in desc.channels):
                        return
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in workers]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors
    desc = http.tunnel().describe(table, "conc")
    assert all(c.channel_status == "TERMINATED" for c in desc.channels)
    assert sum(c.channel_count for c in desc.channels) == 80
    seen = sorted(decode_pk_col(r)[0] for w in workers for recs in w.records.values() for _, r in recs)
    assert seen == list(range(80))  # every row once: each batch was checkpointed before any hand-over
