#!/usr/bin/env bash
# Emulator table and tunnel benchmarks for two revisions, alternated in one run (see revisions.sh).
# Usage: benchmarks/compare_emulator_revisions.sh OLD_REV [ROUNDS]
set -euo pipefail
source "$(dirname "$0")/revisions.sh"
bench() {
  "$python" -m benchmarks.bench_emulator --puts 1000 --rows 20000 | grep -E "PutRow|BatchWrite|GetRange"
  "$python" -m benchmarks.bench_emulator_tunnel --rows 20000 | grep -E "ratio"
}
compare_revisions "${1:?usage: $0 OLD_REV [ROUNDS]}" "${2:-3}" bench
