"""The emulator's table API: DDL and row reads/writes over the store, routed by :class:`~.api.TableApi`."""
