"""The emulator's SQLite store: tables and rows, the stream log, stream partitions and snapshots.

:class:`~.database.Store` composes the components (:mod:`.tables`, :mod:`.stream_log`, :mod:`.snapshots`)
over one :class:`~.core.StoreCore`; :mod:`.model` holds the value types, :mod:`.keys` the row-key encoding.
"""
