# Sourced by benchmarks/compare_*_revisions.sh: run a benchmark for an old revision and the working tree,
# alternated ROUNDS times in one run on one machine (ratios between revisions are only meaningful within a run).
# The old revision is checked out into a temporary git worktree and its C extension built in place (the working
# tree's must be built too: `make venv`); PYTHONPATH selects the tree for each run, and
# the processes a benchmark starts (emulator, Spark workers) inherit it.
# NEW_FIRST=1 runs the working tree first in each round (run order can bias a noisy machine).
# Usage: compare_revisions OLD_REV ROUNDS bench_function   (bench_function runs in the tree, gets no arguments)
compare_revisions() {
  local old_rev=$1 rounds=$2 bench=$3
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  python=${PYTHON:-$repo/.venv/bin/python}
  old_tree=$(mktemp -d)
  git -C "$repo" worktree add -q --detach "$old_tree" "$old_rev"
  trap 'git -C "$repo" worktree remove --force "$old_tree"' EXIT
  # its compiled PlainBuffer extension, in place (PYTHONPATH picks the tree: without it the old tree would run the
  # pure-Python decoder); an old revision that cannot build it says so here
  (cd "$old_tree" && "$python" -c "from setuptools import setup; setup()" build_ext --inplace -q >/dev/null)
  for round in $(seq "$rounds"); do
    trees=("$old_tree" "$repo")
    [ "${NEW_FIRST:-0}" = 1 ] && trees=("$repo" "$old_tree")
    for tree in "${trees[@]}"; do
      label=$([ "$tree" = "$old_tree" ] && echo "old ($old_rev)" || echo "new (working tree)")
      echo "== round $round: $label"
      (cd "$tree" && export PYTHONPATH=$tree && "$bench")
    done
  done
}
