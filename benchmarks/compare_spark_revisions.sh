#!/usr/bin/env bash
# The Spark consumer's full phase (benchmarks/bench_spark.py) for two revisions, alternated in one run (see
# revisions.sh). Usage: benchmarks/compare_spark_revisions.sh OLD_REV [ROUNDS] [ROWS]
set -euo pipefail
source "$(dirname "$0")/revisions.sh"
rows=${3:-200000}
bench() {
  "$python" -m benchmarks.bench_spark --rows "$rows" --channel-rows $((rows / 10)) --no-write \
    | grep -E "^(TunnelWorker|spark_)"
}
compare_revisions "${1:?usage: $0 OLD_REV [ROUNDS] [ROWS]}" "${2:-2}" bench
