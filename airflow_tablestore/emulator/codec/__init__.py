"""The emulator's own PlainBuffer codec: the row format (:mod:`.format`), its encoder and its decoder.

It is the deliberate second, independent implementation of PlainBuffer in this project (the client's is
``airflow_tablestore/client/plainbuffer/``): the emulator never imports ``airflow_tablestore.client``, so a
misreading of the format on one side fails against the other instead of being shared by both. Besides the
``.proto`` files it is the one allowed duplicate in the code base. Values are plain Python objects (``int``,
``float``, ``bool``, ``str``, ``bytes``) plus the ``INF_MIN``/``INF_MAX``/``AUTO_INCREMENT`` singletons of
:mod:`.format`; import each name from the module that defines it.
"""
