"""The Tunnel Service: the ``TunnelClient`` RPCs (``client``), the one tunnel session, and the ``TunnelWorker``.

``session`` is the session every consumer holds (connect, heartbeat, lost and fatal errors, checkpoints, the channel
rules); ``rounds`` is its use by a driver whose channels are read elsewhere in rounds (the Spark consumer and
streaming source); ``reads``, ``span`` and ``cutoff`` hold the read rules. The worker is ``worker`` with its
``channel``, ``pools``, ``config``, ``metrics`` and ``processor`` parts.
"""
