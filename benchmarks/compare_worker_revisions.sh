#!/usr/bin/env bash
# The TunnelWorker's cold drain (time_worker_cold.py) for two revisions' clients against the working tree's
# emulator, alternated in one run (see revisions.sh). NEW_FIRST=1 runs the new tree first in each round, to see
# whether a difference follows the code or the run order.
# Usage: [NEW_FIRST=1] benchmarks/compare_worker_revisions.sh OLD_REV [ROUNDS]
set -euo pipefail
source "$(dirname "$0")/revisions.sh"
bench() {
  EMULATOR_TREE=$repo "$python" "$repo/benchmarks/time_worker_cold.py" --runs 3
}
compare_revisions "${1:?usage: $0 OLD_REV [ROUNDS]}" "${2:-4}" bench
