"""PlainBuffer: the row encoding of the table API and of tunnel records, and its CRC-8.

One module per job: ``format`` (tags, value types, layouts), ``encode`` (rows to bytes), ``decode`` (bytes to
rows), ``sqlvariant`` (single filter/boundary values), ``crc8`` (the checksum) and ``implementation`` (the
compiled decoder of ``_speedups.c`` or pure Python: ``implementation.IMPLEMENTATION`` says which is in use).
Import from those modules.
"""
