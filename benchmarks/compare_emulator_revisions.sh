#!/usr/bin/env bash
# Emulator table and tunnel benchmarks for two revisions, alternated in one run on one machine (ratios between
# revisions are only meaningful within a run). Usage: benchmarks/compare_emulator_revisions.sh OLD_REV [ROUNDS]
# The old revision is checked out into a temporary git worktree; PYTHONPATH selects the tree for each run, and
# the emulator process each benchmark starts inherits it.
set -euo pipefail
old_rev=${1:?usage: $0 OLD_REV [ROUNDS]}
rounds=${2:-3}
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$repo/.venv/bin/python}
old_tree=$(mktemp -d)
git -C "$repo" worktree add -q --detach "$old_tree" "$old_rev"
trap 'git -C "$repo" worktree remove --force "$old_tree"' EXIT
for round in $(seq "$rounds"); do
  for tree in "$old_tree" "$repo"; do
    label=$([ "$tree" = "$old_tree" ] && echo "old ($old_rev)" || echo "new (working tree)")
    echo "== round $round: $label"
    (cd "$tree" && PYTHONPATH=$tree "$python" -m benchmarks.bench_emulator --puts 1000 --rows 20000 | grep -E "PutRow|BatchWrite|GetRange")
    (cd "$tree" && PYTHONPATH=$tree "$python" -m benchmarks.bench_emulator_tunnel --rows 20000 | grep -E "ratio")
  done
done
