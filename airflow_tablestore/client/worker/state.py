"""Channel-state bookkeeping of the heartbeat protocol: merge by version, report transitions as version+1."""

from __future__ import annotations

from collections.abc import Iterable

from airflow_tablestore.client.model import ChannelStatus
from airflow_tablestore.client.tunnel import Channel


def merge_channels(local: dict[str, Channel], remote: Iterable[Channel]) -> dict[str, Channel]:
    """The channels to keep after a heartbeat answer.

    Channels absent from ``remote`` are dropped. For the others a local copy with a *higher* version (a
    transition we reported and the server has not seen yet) wins; otherwise the server's copy does.
    """
    merged: dict[str, Channel] = {}
    for ch in remote:
        mine = local.get(ch.channel_id)
        merged[ch.channel_id] = mine if mine is not None and mine.version > ch.version else ch
    return merged


def transition(channel: Channel, status: ChannelStatus) -> Channel:
    """The local transition of ``channel`` to ``status`` (version + 1), to send in the next heartbeat."""
    return Channel(channel.channel_id, channel.version + 1, status)
