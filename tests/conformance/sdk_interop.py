"""Run by ``test_official_sdk.py`` in the oracle venv: the SDK's side of the client interoperability check.

``python sdk_interop.py ENDPOINT INSTANCE ACCESS_KEY_ID ACCESS_KEY_SECRET TABLE NOW_MS``

Reads every row the project's ``TableClient`` wrote to TABLE, then writes its own rows, increments a counter
in one of ours and deletes another. Prints one JSON line: ``{"read": [[pk, columns], ...]}`` with BINARY
values as ``{"hex": ...}`` (the SDK gives them as ``bytearray``; ``bytes`` would be its STRING type).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

logging.disable(logging.CRITICAL)

from tablestore import INF_MAX, INF_MIN, Condition, OTSClient, Row  # noqa: E402
from tablestore.retry import NoRetryPolicy  # noqa: E402

ENDPOINT, INSTANCE, AK_ID, AK_SECRET, TABLE, NOW = sys.argv[1:7]
NOW_MS = int(NOW)
client = OTSClient(ENDPOINT, AK_ID, AK_SECRET, INSTANCE, retry_policy=NoRetryPolicy())


def plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return {"hex": bytes(value).hex()}
    return value


start: Any = [("s", INF_MIN), ("b", INF_MIN), ("i", INF_MIN)]
end = [("s", INF_MAX), ("b", INF_MAX), ("i", INF_MAX)]
read = []
while start is not None:
    _, start, rows, _ = client.get_range(TABLE, "FORWARD", start, end, max_version=3)
    for row in rows:
        read.append(
            [[[n, plain(v)] for n, v in row.primary_key], [[n, plain(v), ts] for n, v, ts in row.attribute_columns]]
        )

client.put_row(
    TABLE,
    Row(
        [("s", "sdk"), ("b", bytearray(b"\x01\x02")), ("i", -5)],
        [("text", "from the SDK"), ("n", 2**40), ("f", -0.25), ("ok", False), ("blob", bytearray(b"\xfe")),
         ("at", "versioned", NOW_MS)],
    ),
    Condition("EXPECT_NOT_EXIST"),
)
client.update_row(TABLE, Row([("s", "ours"), ("b", bytearray(b"\x00")), ("i", 1)], {"increment": [("n", 10)]}),
                  Condition("EXPECT_EXIST"))
client.delete_row(TABLE, Row([("s", "ours"), ("b", bytearray(b"\x00")), ("i", 2)]), Condition("EXPECT_EXIST"))
print(json.dumps({"read": read}))
