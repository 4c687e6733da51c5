"""The emulator's Tunnel Service (server side): tunnels, channels, heartbeats, tokens, checkpoints, reads.

Its API surface is :class:`~.api.TunnelApi` (``/tunnel/<op>`` routes); the control plane is
:class:`~.service.TunnelService`, the ReadRecords data path :class:`~.reader.RecordReader`. See
``docs/emulator-tunnel.md``.
"""
