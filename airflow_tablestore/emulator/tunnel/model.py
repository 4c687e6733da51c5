"""The tunnel service's data model: tunnels, channels, clients, and the exact wire strings of their states.

Held in memory by :mod:`.shared` and persisted by :mod:`.persistence`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Tunnel types, stages, channel statuses: exact wire strings.
BASE_DATA = "BaseData"
STREAM = "Stream"
BASE_AND_STREAM = "BaseAndStream"
TUNNEL_TYPES = {1: BASE_DATA, 2: STREAM, 3: BASE_AND_STREAM}

STAGE_INIT = "InitBaseDataAndStreamShard"
STAGE_BASE = "ProcessBaseData"
STAGE_STREAM = "ProcessStream"

WAIT = "WAIT"
OPEN = "OPEN"
CLOSING = "CLOSING"
CLOSE = "CLOSE"
TERMINATED = "TERMINATED"
STATUS_TO_WIRE = {OPEN: 1, CLOSING: 2, CLOSE: 3, TERMINATED: 4}
WIRE_TO_STATUS = {v: k for k, v in STATUS_TO_WIRE.items()}


@dataclass(slots=True)
class ChannelState:
    """One channel: a snapshot key range (base) or a stream partition (stream), with its checkpoint."""

    channel_id: str
    kind: str  # BASE_DATA | STREAM
    ordinal: int
    partition_id: str = ""
    parent_ids: tuple[str, ...] = ()
    range_start: bytes | None = None
    range_end: bytes | None = None
    status: str = WAIT
    version: int = 0
    owner: str | None = None
    suspended: bool = False
    ckpt_token: str = ""
    ckpt_seq: int = 0
    ckpt_count: int = 0
    ckpt_rpo_ns: int = 0
    # Set when a read returns "finished": the count/consume point a "finished" checkpoint stands for.
    final_count: int | None = None
    final_rpo_ns: int | None = None

    @property
    def is_stream(self) -> bool:
        return self.kind == STREAM


@dataclass(slots=True)
class TunnelState:
    """One tunnel and its channels (insertion-ordered by channel creation)."""

    tunnel_id: str
    table_name: str
    tunnel_name: str
    tunnel_type: str
    stage: str
    create_time_ns: int
    stream_id: str
    snapshot_id: int | None
    start_seq: int
    start_min_ts_us: int
    start_ns: int
    end_ns: int
    stream_config: bytes
    expired: bool = False
    channels: dict[str, ChannelState] = field(default_factory=dict)

    @property
    def has_stream(self) -> bool:
        return self.tunnel_type in (STREAM, BASE_AND_STREAM)

    def base_done(self) -> bool:
        """True when every base channel is TERMINATED (vacuously for tunnels without base channels)."""
        return all(c.status == TERMINATED for c in self.channels.values() if not c.is_stream)


@dataclass(slots=True)
class ClientState:
    """A connected tunnel client (worker); forgotten on shutdown or heartbeat timeout."""

    client_id: str
    tunnel_id: str
    timeout_s: int
    last_seen_us: int

    def expired(self, now_us: int) -> bool:
        return now_us - self.last_seen_us > self.timeout_s * 1_000_000
