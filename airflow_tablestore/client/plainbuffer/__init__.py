"""PlainBuffer: the row encoding of the table API and of tunnel records, and its CRC-8.

One module per job: ``format`` (tags, value types, layouts), ``encode`` (rows to bytes), ``decode`` (bytes to
rows), ``rows`` (:class:`~airflow_tablestore.client.plainbuffer.rows.Rows`, a page of rows kept as bytes),
``sqlvariant`` (single filter/boundary values), ``crc8`` (the checksum) and ``implementation`` (the one compiled
extension, ``_speedups``: decoder and Arrow builders over one parser, ``_parse.h``; or pure Python:
``implementation.IMPLEMENTATION`` says which is in use). Import from those modules.
"""
