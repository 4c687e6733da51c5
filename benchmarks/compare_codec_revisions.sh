#!/usr/bin/env bash
# The read path for two revisions, alternated in one run (see revisions.sh): PlainBuffer decoding and bytes -> Arrow
# (time_client_api.py, time_arrow_straight.py: the same scripts time both trees), the TunnelWorker's CPU
# per record (bench_worker_cpu), the Spark full phase (bench_spark), spark.read (bench_datasource) and the streaming
# source (bench_stream), at sizes small enough for a shared machine. Usage:
# benchmarks/compare_codec_revisions.sh OLD_REV [ROUNDS]   (issue 30: OLD_REV 57f7ffd, before the one codec)
set -euo pipefail
source "$(dirname "$0")/revisions.sh"
bench() {
  "$python" -c "import airflow_tablestore.client.plainbuffer.implementation as i; print('decoder', i.IMPLEMENTATION)"
  "$python" "$repo/benchmarks/time_client_api.py" --rows 20000 --repeat 5
  "$python" "$repo/benchmarks/time_arrow_straight.py" --rows 5000 --repeat 7
  "$python" -m benchmarks.bench_worker_cpu --rows 60000 --rounds 1 --no-write
  "$python" -m benchmarks.bench_spark --rows 100000 --channel-rows 10000 --no-write 2>&1 | grep -v "WARN\|^\s*$"
  "$python" -m benchmarks.bench_datasource --rows 100000 --rounds 1 --no-write 2>&1 | grep -v "WARN\|^\s*$"
  "$python" -m benchmarks.bench_stream --rows 10000 --changes 10000 --reps 2 --no-write 2>&1 | grep -v "WARN\|^\s*$"
}
compare_revisions "${1:?usage: $0 OLD_REV [ROUNDS]}" "${2:-2}" bench
