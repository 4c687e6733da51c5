"""The emulator's Tunnel Service (server side): tunnels, channels, heartbeats, tokens, checkpoints.

Entry point for the emulator core: :func:`build_tunnel_handlers`. See ``docs/emulator-tunnel.md``.
The submodules import each other by their concrete module names, never from this package, so importing
this package (or any submodule first) has no import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf.message import Message

from airflow_tablestore.emulator.clock import Clock
from airflow_tablestore.emulator.config import EmulatorConfig
from airflow_tablestore.emulator.tunnel.handlers import TunnelHandlers
from airflow_tablestore.emulator.tunnel.reader import RecordReader
from airflow_tablestore.emulator.tunnel.service import TunnelService


def build_tunnel_handlers(store: Any, clock: Clock, config: EmulatorConfig) -> dict[str, Callable[[bytes], Message]]:
    """Create the tunnel service on ``store`` (restoring persisted state) and return its handlers by path."""
    service = TunnelService(store, clock, config)
    return TunnelHandlers(service, RecordReader(service), config.instance).routes()


__all__ = ["build_tunnel_handlers", "TunnelService", "RecordReader", "TunnelHandlers"]
