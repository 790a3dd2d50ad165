#!/usr/bin/env bash
# Whether a change kept the simulator's histories: runs every test of the
# `sim` suite with BIGSET_SIM_TRACE_LOG set (each simulation appends its
# seed, event count, deliveries and trace hash) and compares the logs. A
# refactor meant to change nothing observable must leave every line equal:
# the simulator draws message fates and timer jitter from one generator, so
# a timer armed after a send instead of before it changes every later event.
#
# Usage:
#   bash scripts/trace_compare.sh --log BUILD_DIR   prints BUILD_DIR's log
#   bash scripts/trace_compare.sh REV_A REV_B       builds both (as
#       scripts/test.sh does, without unity) in temporary worktrees and
#       prints the first differences; exits 1 if the histories differ.
# BIGSET_TEST_SCALE and BIGSET_TEST_SEED_STRIDE apply as in the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

log_of() {  # BUILD_DIR: the sim suite's histories, test by test.
  local build="$1" tmp
  tmp=$(mktemp /tmp/bigset-trace.XXXXXX)
  meson introspect "$build" --tests | python3 -c '
import json, sys
for t in json.load(sys.stdin):
    if "bigset:sim" in t["suite"]:
        print(t["name"], t["cmd"][0])' |
  while read -r name exe; do
    echo "== $name"
    rm -f "$tmp"
    BIGSET_SIM_TRACE_LOG="$tmp" "$exe" >/dev/null 2>&1 ||
      echo "($name failed)"
    [[ -f "$tmp" ]] && cat "$tmp"
  done
  rm -f "$tmp"
}

if [[ "${1:-}" == "--log" ]]; then
  log_of "$2"
  exit 0
fi

rev_a="$1"
rev_b="$2"
source scripts/worktree_pair.sh
build_side() {  # SIDE REV, in the side's worktree
  meson setup build -Doptimization=1 -Ddebug=false -Db_ndebug=false \
    >/dev/null
  ninja -C build >/dev/null
  log_of build >"../$1.log"
  echo "$1 = $(git rev-parse --short "$2"): $(grep -c '^seed' "../$1.log") simulations" >&2
}
worktree_pair bigset-trace-compare "$rev_a" "$rev_b" build_side
if diff "$work/a.log" "$work/b.log" >"$work/diff"; then
  echo "histories equal"
else
  head -40 "$work/diff"
  echo "histories differ"
  exit 1
fi
