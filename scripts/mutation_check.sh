#!/usr/bin/env bash
# The mutation check of the soak: applies each patch in tests/mutations (each
# reverts the fix of one defect), builds the soak and runs it, and reports
# whether the soak found the defect (it must), with the failing seed and the
# number of operations it ran. Restores the tree afterwards.
# Usage: bash scripts/mutation_check.sh [PATCH...]
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
dir=build-mutation
if [[ ! -f "$dir/build.ninja" ]]; then
  meson setup "$dir" --buildtype=debugoptimized >/dev/null || exit 1
fi
patches=("$@")
if [[ ${#patches[@]} -eq 0 ]]; then
  patches=(tests/mutations/*.patch)
fi
status=0
for patch in "${patches[@]}"; do
  name=$(basename "$patch" .patch)
  if ! git apply "$patch"; then
    echo "$name: patch does not apply" >&2
    status=1
    continue
  fi
  if ninja -C "$dir" tests/soak_test >/dev/null 2>&1; then
    log=$(mktemp)
    BIGSET_TEST_SCALE="${SCALE:-4}" timeout 900 \
      ./"$dir"/tests/soak_test "soak: random operations*" >"$log" 2>&1
    rc=$?
    out=$(tr -d '\000' <"$log")
    rm -f "$log"
  else
    out="build failed"
    rc=1
  fi
  git apply -R "$patch"
  if [[ $rc -eq 0 ]]; then
    echo "$name: NOT FOUND by the soak"
    status=1
  else
    seed=$(grep -o 'seed := [0-9]* (0x[0-9a-f]*)' <<<"$out" | head -1)
    where=$(grep -m1 -E 'FAILED|SIGSEGV|Segmentation|signal|AddressSanitizer' \
      <<<"$out" | head -c 160)
    steps=$(grep -o 'step := [0-9]*' <<<"$out" | head -1 | grep -o '[0-9]*$')
    echo "$name: found (${seed:-no seed printed}; ${steps:+after $steps operations; }${where})"
  fi
done
exit $status
