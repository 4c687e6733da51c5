"""The table API: ``TableClient`` (in ``client``), composed of its DDL (``ddl``) and row (``rows``)
operations.

The other modules turn the caller's arguments (``arguments``), conditions (``conditions``), schemas
(``schema``) and batched writes (``batch_write``) into requests.
"""
