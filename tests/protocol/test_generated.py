"""The committed ``*_pb2.py`` modules must be exactly what ``make proto`` generates from the ``.proto`` files."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_tablestore.protocol import generate


def test_generated_modules_are_current(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    for produced in generate.generate(tmp_path):
        committed = generate.PACKAGE_DIR / produced.name
        assert committed.exists(), f"{committed.name} missing: run `make proto`"
        assert committed.read_text() == produced.read_text(), f"{committed.name} is stale: run `make proto`"


def test_no_runtime_version_guard() -> None:
    # The guard would refuse protobuf runtimes two majors apart; the supported range is 5.29 .. 7.x.
    for name in ("ots_table_pb2.py", "ots_filter_pb2.py", "ots_tunnel_pb2.py"):
        assert "ValidateProtobufRuntimeVersion" not in (generate.PACKAGE_DIR / name).read_text()


def test_own_file_and_package_names() -> None:
    """Never `table_store.proto` / `com.aliyun.tablestore.protocol`: the official SDK can share the process."""
    from airflow_tablestore.protocol import ots_table_pb2, ots_tunnel_pb2

    assert ots_table_pb2.DESCRIPTOR.name == "airflow_tablestore/protocol/ots_table.proto"
    assert ots_table_pb2.DESCRIPTOR.package == "airflow_tablestore.wire.table"
    assert ots_tunnel_pb2.DESCRIPTOR.package == "airflow_tablestore.wire.tunnel"


def test_reference_wire_vector() -> None:
    """ConnectRequest from the tunnel reference's signing vector serialises to the same bytes."""
    from airflow_tablestore.protocol import ots_tunnel_pb2 as tunnel_pb2

    request = tunnel_pb2.ConnectRequest(
        tunnel_id="t1", client_config=tunnel_pb2.ClientConfig(timeout=300, client_tag="host")
    )
    assert request.SerializeToString().hex() == "0a0274311209" + "08ac02" + "1204686f7374"
