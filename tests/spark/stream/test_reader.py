"""How a micro-batch's channel spans become read tasks (``group_spans``)."""

from __future__ import annotations

import pytest

from airflow_tablestore.client.tunnel.span import Position, Span
from airflow_tablestore.spark.stream.planner import ChannelSpan
from airflow_tablestore.spark.stream.reader import group_spans


def spans(count: int) -> list[ChannelSpan]:
    return [ChannelSpan(f"ch{i:03d}", Span(Position(f"t{i}"), 100, None, False)) for i in range(count)]


@pytest.mark.parametrize(("channels", "max_tasks", "tasks", "largest"), [
    (0, 8, 0, 0),        # nothing to read: no task
    (4, 8, 4, 1),        # fewer channels than tasks: one span each
    (8, 8, 8, 1),
    (256, 8, 8, 32),     # many channels: bounded by the option, evenly dealt
    (257, 8, 8, 33),
    (256, 1, 1, 256),
])
def test_spans_are_dealt_to_at_most_max_tasks(channels: int, max_tasks: int, tasks: int, largest: int) -> None:
    planned = spans(channels)
    groups = group_spans(planned, max_tasks)
    assert len(groups) == tasks
    assert max((len(g) for g in groups), default=0) == largest
    assert min((len(g) for g in groups), default=0) >= largest - 1
    dealt = [s.channel_id for g in groups for s in g]
    assert sorted(dealt) == [s.channel_id for s in planned]  # every span once
    assert group_spans(list(planned), max_tasks) == groups  # a re-run batch groups the same way
