#!/usr/bin/env bash
# The Spark consumer's full phase (benchmarks/bench_spark.py) for two revisions, alternated in one run on one
# machine (ratios between revisions are only meaningful within a run).
# Usage: benchmarks/compare_spark_revisions.sh OLD_REV [ROUNDS] [ROWS]
# The old revision is checked out into a temporary git worktree; PYTHONPATH selects the tree for each run (the
# benchmark passes it on to Spark's Python workers and the emulator process).
set -euo pipefail
old_rev=${1:?usage: $0 OLD_REV [ROUNDS] [ROWS]}
rounds=${2:-2}
rows=${3:-200000}
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$repo/.venv/bin/python}
old_tree=$(mktemp -d)
git -C "$repo" worktree add -q --detach "$old_tree" "$old_rev"
trap 'git -C "$repo" worktree remove --force "$old_tree"' EXIT
for round in $(seq "$rounds"); do
  for tree in "$old_tree" "$repo"; do
    label=$([ "$tree" = "$old_tree" ] && echo "old ($old_rev)" || echo "new (working tree)")
    echo "== round $round: $label"
    (cd "$tree" && PYTHONPATH=$tree "$python" -m benchmarks.bench_spark --rows "$rows" --channel-rows $((rows / 10)) \
        --no-write | grep -E "^(TunnelWorker|spark_)")
  done
done
