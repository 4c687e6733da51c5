"""SQLite persistence of the tunnel service's state, in the emulator store's database.

The service keeps the authoritative state in memory (under its lock) and writes every change through to
these tables, so a restarted emulator resumes with the same tunnels, channels (status, version, owner),
checkpoints and clients.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from airflow_tablestore.emulator.store.core import StoreCore
from airflow_tablestore.emulator.tunnel.model import ChannelState, ClientState, TunnelState

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS tunnel_tunnels (
        tunnel_id TEXT PRIMARY KEY, table_name TEXT NOT NULL, tunnel_name TEXT NOT NULL,
        tunnel_type TEXT NOT NULL, stage TEXT NOT NULL, create_time_ns INTEGER NOT NULL,
        stream_id TEXT NOT NULL, snapshot_id INTEGER, start_seq INTEGER NOT NULL,
        start_min_ts_us INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,
        stream_config BLOB NOT NULL, expired INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS tunnel_channels (
        tunnel_id TEXT NOT NULL, channel_id TEXT NOT NULL, kind TEXT NOT NULL, ordinal INTEGER NOT NULL,
        partition_id TEXT NOT NULL, parent_ids TEXT NOT NULL, range_start BLOB, range_end BLOB,
        status TEXT NOT NULL, version INTEGER NOT NULL, owner TEXT, suspended INTEGER NOT NULL,
        ckpt_token TEXT NOT NULL, ckpt_seq INTEGER NOT NULL, ckpt_count INTEGER NOT NULL,
        ckpt_rpo_ns INTEGER NOT NULL, final_count INTEGER, final_rpo_ns INTEGER,
        PRIMARY KEY (tunnel_id, channel_id))""",
    """CREATE TABLE IF NOT EXISTS tunnel_clients (
        client_id TEXT PRIMARY KEY, tunnel_id TEXT NOT NULL, timeout_s INTEGER NOT NULL,
        last_seen_us INTEGER NOT NULL)""",
)

_TUNNEL_COLS = ("tunnel_id, table_name, tunnel_name, tunnel_type, stage, create_time_ns, stream_id, "
                "snapshot_id, start_seq, start_min_ts_us, start_ns, end_ns, stream_config, expired")
_CHANNEL_COLS = ("tunnel_id, channel_id, kind, ordinal, partition_id, parent_ids, range_start, range_end, "
                 "status, version, owner, suspended, ckpt_token, ckpt_seq, ckpt_count, ckpt_rpo_ns, "
                 "final_count, final_rpo_ns")
_CLIENT_COLS = "client_id, tunnel_id, timeout_s, last_seen_us"

Statement = tuple[str, Sequence[Any]]


class TunnelRepository:
    """Reads and writes the ``tunnel_*`` tables through the store's write transactions."""

    def __init__(self, db: StoreCore) -> None:
        self._db = db
        self._run([(sql, ()) for sql in _SCHEMA])

    # -- writing --------------------------------------------------------------------------------------
    def _run(self, statements: Iterable[Statement]) -> None:
        stmts = list(statements)
        if not stmts:
            return
        with self._db.write() as txn:
            for sql, params in stmts:
                txn.execute(sql, params)

    @staticmethod
    def tunnel_stmt(t: TunnelState) -> Statement:
        return (
            f"INSERT OR REPLACE INTO tunnel_tunnels ({_TUNNEL_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (t.tunnel_id, t.table_name, t.tunnel_name, t.tunnel_type, t.stage, t.create_time_ns,
             t.stream_id, t.snapshot_id, t.start_seq, t.start_min_ts_us, t.start_ns, t.end_ns,
             t.stream_config, int(t.expired)),
        )

    @staticmethod
    def channel_stmt(tunnel_id: str, c: ChannelState) -> Statement:
        return (
            f"INSERT OR REPLACE INTO tunnel_channels ({_CHANNEL_COLS}) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (tunnel_id, c.channel_id, c.kind, c.ordinal, c.partition_id, json.dumps(list(c.parent_ids)),
             c.range_start, c.range_end, c.status, c.version, c.owner, int(c.suspended), c.ckpt_token,
             c.ckpt_seq, c.ckpt_count, c.ckpt_rpo_ns, c.final_count, c.final_rpo_ns),
        )

    @staticmethod
    def client_stmt(c: ClientState) -> Statement:
        return (
            f"INSERT OR REPLACE INTO tunnel_clients ({_CLIENT_COLS}) VALUES (?,?,?,?)",
            (c.client_id, c.tunnel_id, c.timeout_s, c.last_seen_us),
        )

    def save(self, *, tunnels: Iterable[TunnelState] = (),
             channels: Iterable[tuple[str, ChannelState]] = (),
             clients: Iterable[ClientState] = (), deleted_clients: Iterable[str] = ()) -> None:
        """Write the given objects (and delete the given client ids) in one transaction."""
        stmts = [self.tunnel_stmt(t) for t in tunnels]
        stmts += [self.channel_stmt(tid, c) for tid, c in channels]
        stmts += [self.client_stmt(c) for c in clients]
        stmts += [("DELETE FROM tunnel_clients WHERE client_id = ?", (cid,)) for cid in deleted_clients]
        self._run(stmts)

    def save_checkpoint(self, tunnel_id: str, c: ChannelState) -> None:
        """The hot write: only the checkpoint columns of one channel."""
        self._run([(
            "UPDATE tunnel_channels SET ckpt_token = ?, ckpt_seq = ?, ckpt_count = ?, ckpt_rpo_ns = ? "
            "WHERE tunnel_id = ? AND channel_id = ?",
            (c.ckpt_token, c.ckpt_seq, c.ckpt_count, c.ckpt_rpo_ns, tunnel_id, c.channel_id),
        )])

    def save_final(self, tunnel_id: str, c: ChannelState) -> None:
        """What a later "finished" checkpoint of the channel stands for (row count, consume point)."""
        self._run([(
            "UPDATE tunnel_channels SET final_count = ?, final_rpo_ns = ? "
            "WHERE tunnel_id = ? AND channel_id = ?",
            (c.final_count, c.final_rpo_ns, tunnel_id, c.channel_id),
        )])

    def touch_client(self, client_id: str, last_seen_us: int) -> None:
        self._run([("UPDATE tunnel_clients SET last_seen_us = ? WHERE client_id = ?",
                    (last_seen_us, client_id))])

    def delete_tunnel(self, tunnel_id: str) -> None:
        self._run([
            ("DELETE FROM tunnel_channels WHERE tunnel_id = ?", (tunnel_id,)),
            ("DELETE FROM tunnel_clients WHERE tunnel_id = ?", (tunnel_id,)),
            ("DELETE FROM tunnel_tunnels WHERE tunnel_id = ?", (tunnel_id,)),
        ])

    # -- loading --------------------------------------------------------------------------------------
    def load(self) -> tuple[dict[str, TunnelState], dict[str, ClientState]]:
        """Everything persisted: tunnels (with channels in ordinal order) and clients."""
        tunnels: dict[str, TunnelState] = {}
        for r in self._db.execute(f"SELECT {_TUNNEL_COLS} FROM tunnel_tunnels ORDER BY create_time_ns"):
            tunnels[r[0]] = TunnelState(
                tunnel_id=r[0], table_name=r[1], tunnel_name=r[2], tunnel_type=r[3], stage=r[4],
                create_time_ns=r[5], stream_id=r[6], snapshot_id=r[7], start_seq=r[8], start_min_ts_us=r[9],
                start_ns=r[10], end_ns=r[11], stream_config=bytes(r[12]), expired=bool(r[13]),
            )
        for r in self._db.execute(f"SELECT {_CHANNEL_COLS} FROM tunnel_channels ORDER BY tunnel_id, ordinal"):
            tunnel = tunnels.get(r[0])
            if tunnel is None:
                continue
            tunnel.channels[r[1]] = ChannelState(
                channel_id=r[1], kind=r[2], ordinal=r[3], partition_id=r[4],
                parent_ids=tuple(json.loads(r[5])),
                range_start=None if r[6] is None else bytes(r[6]),
                range_end=None if r[7] is None else bytes(r[7]),
                status=r[8], version=r[9], owner=r[10], suspended=bool(r[11]), ckpt_token=r[12],
                ckpt_seq=r[13], ckpt_count=r[14], ckpt_rpo_ns=r[15], final_count=r[16], final_rpo_ns=r[17],
            )
        clients = {
            r[0]: ClientState(client_id=r[0], tunnel_id=r[1], timeout_s=r[2], last_seen_us=r[3])
            for r in self._db.execute(f"SELECT {_CLIENT_COLS} FROM tunnel_clients")
        }
        return tunnels, clients
