"""Protobuf wire definitions shared by the client and the emulator (the only code they share).

``ots_table_pb2``/``ots_filter_pb2`` hold the table and Stream API messages, ``ots_tunnel_pb2`` the Tunnel
Service ones. The ``.proto`` sources sit beside them; ``make proto`` regenerates the modules. Import them as
``from airflow_tablestore.protocol import ots_table_pb2 as table_pb2``.
"""
