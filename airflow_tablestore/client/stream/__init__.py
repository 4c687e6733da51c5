"""The Stream API: the ``StreamClient`` RPCs (``client``) and the lease-based ``StreamWorker`` (``worker``).

The worker's parts: ``lease`` (the status table), ``balance``, ``shard`` (one shard's consumer), ``config``,
``metrics`` and ``processor`` (the interface your code implements).
"""
