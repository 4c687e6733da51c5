#!/usr/bin/env bash
# The client's hot paths for two revisions, alternated in one run (see revisions.sh): PlainBuffer through its
# public API (the same script times both trees) and the TunnelWorker against its bare ReadRecords loop.
# Usage: benchmarks/compare_client_revisions.sh OLD_REV [ROUNDS]
set -euo pipefail
source "$(dirname "$0")/revisions.sh"
bench() {
  "$python" "$repo/benchmarks/time_client_api.py" --rows 20000 --repeat 5
  "$python" -m benchmarks.bench_tunnel_worker --rows 60000 --channel-rows 10000 --rounds 2 --no-write \
    | grep -E "x$" | grep -v "^ "
}
compare_revisions "${1:?usage: $0 OLD_REV [ROUNDS]}" "${2:-3}" bench
