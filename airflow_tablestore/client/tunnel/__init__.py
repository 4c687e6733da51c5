"""The Tunnel Service: the ``TunnelClient`` RPCs (``client``) and the ``TunnelWorker`` that consumes a tunnel.

``reads``, ``session`` and ``cutoff`` hold the protocol rules the worker and the Spark driver share; the
worker is ``worker`` with its ``channel``, ``checkpointer``, ``config``, ``metrics`` and ``processor`` parts.
"""
