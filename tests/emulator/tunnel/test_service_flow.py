"""Tunnel state machine, in process over a real Store: flow, replay exactness, checkpoints, errors."""

from __future__ import annotations

import pytest

from testing.emulator_tunnel import CLOSE, FINISHED, OPEN, TERMINATED, CallError, Env, decode_pk_col, delete, put


def _table_with_rows(env: Env, rows: int) -> str:
    """A new table holding rows 0..rows-1, each with the value "x"."""
    table = env.create_table()
    for i in range(rows):
        put(env.store, table, i, "x")
    return table


def _one_base_channel(env: Env, table: str, name: str) -> tuple[str, str, str]:
    """A BaseData tunnel on a small table and a client that owns its single channel: (tunnel, client, channel)."""
    tid = env.tunnel.create(table, name, 1)
    cid = env.tunnel.connect(tid)
    (ch,) = env.tunnel.heartbeat(tid, cid)
    return tid, cid, ch


def _finish(env: Env, tid: str, cid: str, channels: dict[str, tuple[int, int]]) -> dict[str, list[tuple[int, bytes]]]:
    """Drain every given channel to "finished" and report TERMINATED; returns records per channel."""
    out = {}
    for ch in channels:
        records, token = env.tunnel.drain(tid, cid, ch)
        assert token == FINISHED
        out[ch] = records
    env.tunnel.heartbeat(tid, cid, [(ch, v + 1, TERMINATED) for ch, (v, _) in channels.items()])
    return out


def test_base_and_stream_replay_is_exact(env: Env) -> None:
    table = env.create_table()
    for i in range(25):
        put(env.store, table, i, f"v{i}")
    tid = env.tunnel.create(table, "tn", 3)
    # writes after creation belong to the stream phase only
    put(env.store, table, 3, "changed")
    delete(env.store, table, 4)
    put(env.store, table, 100, "new")

    desc = env.tunnel.describe(table, "tn")
    assert desc.tunnel.stage == "ProcessBaseData"
    base = [c for c in desc.channels if c.channel_type == "BaseData"]
    stream = [c for c in desc.channels if c.channel_type == "Stream"]
    assert len(base) == 3 and len(stream) == 2  # 25 rows / 10 per range; 2 partitions
    assert all(c.channel_status == "WAIT" for c in desc.channels)
    assert all(c.channel_id.count("_") == 1 for c in desc.channels)

    cid = env.tunnel.connect(tid)
    assigned = env.tunnel.heartbeat(tid, cid)
    assert set(assigned) == {c.channel_id for c in base}  # stream channels wait for the base phase
    state: dict[int, str | None] = {}
    for records in _finish(env, tid, cid, assigned).values():
        for action, rec in records:
            assert action == 1
            pk, value = decode_pk_col(rec)
            state[pk] = value
    assert state == {i: f"v{i}" for i in range(25)}

    assigned = env.tunnel.heartbeat(tid, cid)
    desc = env.tunnel.describe(table, "tn")
    assert desc.tunnel.stage == "ProcessStream"
    assert set(assigned) == {c.channel_id for c in stream}
    for ch in assigned:
        records, token = env.tunnel.drain(tid, cid, ch)
        assert token != FINISHED
        for action, rec in records:
            pk, value = decode_pk_col(rec)
            if action == 3:
                state.pop(pk)
            else:
                state[pk] = value
    expected = {i: f"v{i}" for i in range(25) if i != 4}
    expected[3] = "changed"
    expected[100] = "new"
    assert state == expected

    desc = env.tunnel.describe(table, "tn")
    counts = {c.channel_id: c.channel_count for c in desc.channels}
    assert sum(counts[c.channel_id] for c in base) == 25
    assert sum(counts[c.channel_id] for c in stream) == 3
    assert all(c.channel_status == "TERMINATED" for c in desc.channels if c.channel_type == "BaseData")
    # idle head reads embed "now": the tunnel consume point is at least the last write's time
    assert desc.tunnel_rpo >= desc.tunnel.create_time


def test_same_token_same_records_and_limits(env: Env) -> None:
    table = _table_with_rows(env, 9)
    tid, cid, ch = _one_base_channel(env, table, "b")
    token, seq = env.tunnel.get_checkpoint(tid, cid, ch)
    assert seq == 0
    first = env.tunnel.read(tid, cid, ch, token)
    again = env.tunnel.read(tid, cid, ch, token)
    assert len(first.records) == 7 and first.may_more_record  # max_read_records = 7
    assert [r.record for r in first.records] == [r.record for r in again.records]
    assert first.next_token == again.next_token
    last = env.tunnel.read(tid, cid, ch, first.next_token)
    assert len(last.records) == 2 and last.next_token == FINISHED and not last.may_more_record
    with pytest.raises(CallError) as err:
        env.tunnel.read(tid, cid, ch, FINISHED)
    assert err.value.code == "OTSParameterInvalid"


def test_checkpoint_sequence_and_ownership(env: Env) -> None:
    table = env.create_table()
    put(env.store, table, 1, "a")
    tid = env.tunnel.create(table, "b", 1)
    c1 = env.tunnel.connect(tid)
    c2 = env.tunnel.connect(tid)
    (ch,) = env.tunnel.heartbeat(tid, c1)
    assert env.tunnel.heartbeat(tid, c2) == {}
    token, _ = env.tunnel.get_checkpoint(tid, c2, ch)  # lenient for any live client
    env.tunnel.checkpoint(tid, c1, ch, token, 1)
    with pytest.raises(CallError) as err:
        env.tunnel.checkpoint(tid, c1, ch, token, 1)
    assert (err.value.code, err.value.status) == ("OTSSequenceNumberNotMatch", 400)
    with pytest.raises(CallError) as err:
        env.tunnel.checkpoint(tid, c2, ch, token, 5)
    assert (err.value.code, err.value.status) == ("OTSResourceGone", 410)
    with pytest.raises(CallError) as err:
        env.tunnel.read(tid, c2, ch, token)
    assert (err.value.code, err.value.status) == ("OTSResourceGone", 410)
    with pytest.raises(CallError) as err:
        env.tunnel.read(tid, "nobody", ch, token)
    assert (err.value.code, err.value.status) == ("OTSResourceGone", 410)
    # nothing was lost: the checkpoint of the owner is intact and reading still works
    assert env.tunnel.get_checkpoint(tid, c1, ch) == (token, 1)
    resp = env.tunnel.read(tid, c1, ch, token)
    assert resp.next_token == FINISHED and len(resp.records) == 1
    env.tunnel.checkpoint(tid, c1, ch, FINISHED, 2)
    assert env.tunnel.get_checkpoint(tid, c1, ch) == (FINISHED, 2)
    desc = env.tunnel.describe(table, "b")
    assert desc.channels[0].channel_count == 1


def test_errors_create_describe(env: Env) -> None:
    table = env.create_table()
    plain = env.create_table("plain", stream=False)
    with pytest.raises(CallError) as err:
        env.tunnel.create("missing", "x", 1)
    assert err.value.code == "OTSParameterInvalid"
    with pytest.raises(CallError) as err:
        env.tunnel.create(plain, "x", 2)
    assert err.value.code == "OTSParameterInvalid" and "stream" in err.value.message
    env.tunnel.create(plain, "x", 1)  # BaseData needs no stream
    env.tunnel.create(table, "dup", 2)
    with pytest.raises(CallError) as err:
        env.tunnel.create(table, "dup", 1)
    assert (err.value.code, err.value.status) == ("OTSTunnelExist", 409)
    with pytest.raises(CallError) as err:
        env.tunnel.describe(table, "nope")
    assert err.value.code == "OTSParameterInvalid" and "tunnel not exist" in err.value.message
    with pytest.raises(CallError) as err:
        env.tunnel.connect("no-such-id")
    assert "tunnel not exist" in err.value.message
    assert {t.tunnel_name for t in env.tunnel.list_tunnels()} == {"x", "dup"}
    assert [t.tunnel_name for t in env.tunnel.list_tunnels(table)] == ["dup"]
    env.tunnel.delete(table, "dup")
    assert [t.tunnel_name for t in env.tunnel.list_tunnels(table)] == []


def test_rebalance_between_clients(env: Env) -> None:
    table = _table_with_rows(env, 40)
    tid = env.tunnel.create(table, "b", 1)  # 4 base channels
    a = env.tunnel.connect(tid, tag="a")
    got_a = env.tunnel.heartbeat(tid, a)
    assert len(got_a) == 4 and all(s == OPEN for _, s in got_a.values())
    b = env.tunnel.connect(tid, tag="b")
    assert env.tunnel.heartbeat(tid, b) == {}  # nothing free yet
    got_a = env.tunnel.heartbeat(tid, a, [(c, v, s) for c, (v, s) in got_a.items()])
    closing = {c: v for c, (v, s) in got_a.items() if s == 2}
    assert len(closing) == 2
    # a reports CLOSE with version+1; then b receives them OPEN
    got_a = env.tunnel.heartbeat(tid, a, [(c, v + 1, CLOSE) for c, v in closing.items()])
    assert set(got_a) == set(env.tunnel.heartbeat(tid, a)) and len(got_a) == 2
    got_b = env.tunnel.heartbeat(tid, b)
    assert set(got_b) == set(closing)
    assert all(v == closing[c] + 2 and s == OPEN for c, (v, s) in got_b.items())
    # stale report from the old owner is ignored
    c0 = next(iter(closing))
    env.tunnel.heartbeat(tid, a, [(c0, 99, CLOSE)])
    assert env.tunnel.heartbeat(tid, b)[c0][1] == OPEN
    # shutdown releases b's channels to a
    env.tunnel.shutdown(tid, b)
    assert len(env.tunnel.heartbeat(tid, a)) == 4
    with pytest.raises(CallError) as err:
        env.tunnel.heartbeat(tid, b)
    assert err.value.status == 410


def test_client_timeout_releases_channels(env: Env) -> None:
    table = env.create_table()
    put(env.store, table, 1, "a")
    tid = env.tunnel.create(table, "b", 1)
    a = env.tunnel.connect(tid, timeout=5)
    b = env.tunnel.connect(tid, timeout=60)
    (ch,) = env.tunnel.heartbeat(tid, a)
    env.clock.advance(10)
    got = env.tunnel.heartbeat(tid, b)
    assert ch in got  # a timed out: its channel went CLOSE and then to b
    with pytest.raises(CallError) as err:
        env.tunnel.heartbeat(tid, a)
    assert (err.value.code, err.value.status) == ("OTSResourceGone", 410)


def test_restart_keeps_state(env: Env) -> None:
    table = _table_with_rows(env, 15)
    tid = env.tunnel.create(table, "b", 3)
    a = env.tunnel.connect(tid)
    chans = env.tunnel.heartbeat(tid, a)
    ch = sorted(chans)[0]
    token, _ = env.tunnel.get_checkpoint(tid, a, ch)
    resp = env.tunnel.read(tid, a, ch, token)
    env.tunnel.checkpoint(tid, a, ch, resp.next_token, 1)
    before = env.tunnel.describe(table, "b")
    env.restart()
    after = env.tunnel.describe(table, "b")
    assert after == before
    assert env.tunnel.get_checkpoint(tid, a, ch) == (resp.next_token, 1)
    assert env.tunnel.heartbeat(tid, a, [(c, v, s) for c, (v, s) in chans.items()]) == chans
    rest, token = env.tunnel.drain(tid, a, ch)
    assert len(resp.records) + len(rest) == 10 and token == FINISHED


def test_recreated_table_does_not_leak_into_old_tunnel(env: Env) -> None:
    table = env.create_table()
    env.tunnel.create(table, "s", 2)
    before = {c.channel_id for c in env.tunnel.describe(table, "s").channels}
    env.store.tables.delete(table)
    env.create_table(table)
    desc = env.tunnel.describe(table, "s")
    assert {c.channel_id for c in desc.channels} == before  # no channels of the new table's stream
    assert desc.tunnel.expired is True
    with pytest.raises(CallError) as err:
        env.tunnel.connect(desc.tunnel.tunnel_id)
    assert err.value.code == "OTSTunnelExpired"


def test_finished_count_survives_restart_between_read_and_checkpoint(env: Env) -> None:
    table = _table_with_rows(env, 5)
    tid, cid, ch = _one_base_channel(env, table, "f")
    token, _ = env.tunnel.get_checkpoint(tid, cid, ch)
    resp = env.tunnel.read(tid, cid, ch, token)
    assert resp.next_token == FINISHED and len(resp.records) == 5
    env.restart()
    env.tunnel.checkpoint(tid, cid, ch, FINISHED, 1)
    (info,) = env.tunnel.describe(table, "f").channels
    assert info.channel_count == 5
