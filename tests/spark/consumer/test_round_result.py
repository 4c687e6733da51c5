"""The consumer's control row: one declaration, its Arrow schema and Spark DDL derived from it."""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from airflow_tablestore.spark.consumer.round_result import ChannelResult


def test_schema_and_ddl_follow_the_fields_in_order() -> None:
    names = [field.name for field in dataclasses.fields(ChannelResult)]
    assert ChannelResult.ARROW_SCHEMA.names == names
    assert [part.split(" ")[0] for part in ChannelResult.DDL.split(", ")] == names
    assert ChannelResult.ARROW_SCHEMA.field("next_token").type == pa.string()
    assert ChannelResult.ARROW_SCHEMA.field("max_sequence_timestamp_us").type == pa.int64()
    assert "finished boolean" in ChannelResult.DDL and "read_seconds double" in ChannelResult.DDL


def test_a_result_round_trips_through_its_arrow_batch() -> None:
    result = ChannelResult("c1", "t0", "t1", False, records=3, bytes=99, reads=1, max_sequence_timestamp_us=None,
                           read_seconds=0.5, error="TablestoreServerError: busy")
    batch = result.to_batch()
    assert batch.schema == ChannelResult.ARROW_SCHEMA and batch.num_rows == 1
    assert ChannelResult.from_row(batch.to_pylist()[0]) == result
