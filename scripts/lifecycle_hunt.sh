#!/usr/bin/env bash
# Runs the lifecycle soak's network-partition histories one seed at a time
# (each in its own process, so that one failure does not hide the rest)
# and prints the seeds that failed and one summary line. For the long runs
# CI does not do: thousands of histories of hundreds of operations.
#
# Usage: bash scripts/lifecycle_hunt.sh [FROM] [TO] [OPS] [BUILD] [KIND]
#   FROM, TO  history numbers (seed 0x5eed0000 + i for i in [FROM, TO));
#             default 0 1000
#   OPS       operations per history (default 500)
#   BUILD     build directory with tests/lifecycle_soak_test (build-test)
#   KIND      partitions (default) or back: the histories in which nodes
#             that left come back (the same id) while the network splits
# A failing history's output is kept in lifecycle-hunt-<seed>.txt; rerun it
# with BIGSET_TEST_SEED=<seed> BIGSET_LIFECYCLE_OPS=<ops> and the test
# case of KIND.
set -uo pipefail
cd "$(dirname "$0")/.."
from="${1:-0}"
to="${2:-1000}"
ops="${3:-500}"
build="${4:-build-test}"
case "${5:-partitions}" in
  partitions) filter="lifecycle soak: network partitions*" ;;
  back) filter="lifecycle soak: nodes that left come back*" ;;
  *)
    echo "unknown kind ${5}: partitions or back" >&2
    exit 2
    ;;
esac
soak="$build/tests/lifecycle_soak_test"
if [[ ! -x "$soak" ]]; then
  echo "no $soak: build it first (bash scripts/test.sh)" >&2
  exit 2
fi
failed=0
for ((i = from; i < to; i++)); do
  seed=$((0x5eed0000 + i))
  out="lifecycle-hunt-$seed.txt"
  if BIGSET_LIFECYCLE_OPS="$ops" BIGSET_TEST_SEED="$seed" timeout 600 \
      "$soak" "$filter" >"$out" 2>&1; then
    rm -f "$out"
  else
    failed=$((failed + 1))
    echo "seed $seed failed: $out"
  fi
done
echo "$((to - from)) histories of $ops operations, $failed failed"
[[ $failed -eq 0 ]]
