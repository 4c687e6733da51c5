"""The emulator's public Stream API over the store's stream log: :class:`~.api.StreamApi`, its iterators."""
