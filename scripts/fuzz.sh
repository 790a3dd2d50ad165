#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for
# SECONDS seconds (default 30), two at a time.
# Usage: bash scripts/fuzz.sh [SECONDS]
# The targets come from build-asan when `scripts/test.sh --sanitize` made it
# (one clang build for the sanitizers, the lock analysis and the fuzzers),
# else from their own build-fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"

BIGSET_WITH_CLANG=1 bash scripts/install-deps.sh
dir=build-fuzz
if [[ -f build-asan/build.ninja ]] &&
   grep -q "fuzzer-no-link" build-asan/build.ninja; then
  dir=build-asan
elif [[ ! -f build-fuzz/build.ninja ]]; then
  # A clang sanitizer build also puts coverage instrumentation in the
  # libraries (meson.build, fuzz_coverage_args): the decoders the fuzzers
  # drive live there.
  CXX=clang++ meson setup build-fuzz --buildtype=debugoptimized \
    -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
fuzzers=(tests/message_fuzzer tests/delta_fuzzer tests/clock_fuzzer
         tests/key_fuzzer tests/bigsetd/resp_fuzzer
         tests/bigsetd/cluster_map_fuzzer tests/membership_record_fuzzer
         tests/etcd/etcd_answer_fuzzer)
ninja -C "$dir" "${fuzzers[@]}"
# Two at a time (each fuzzer runs one thread; the machines have two
# cores), each for the whole time; their outputs are printed in order.
logs=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$logs"' EXIT
failed=0
run_pair() {  # Runs the fuzzers given at once; prints each one's tail.
  local pids=() f name
  for f in "$@"; do
    name=$(basename "$f")
    mkdir -p "$dir/corpus/$name"
    "./$dir/$f" -max_total_time="$seconds" -print_final_stats=0 \
      "$dir/corpus/$name" >"$logs/$name" 2>&1 &
    pids+=($!)
  done
  local i=0
  for f in "$@"; do
    name=$(basename "$f")
    echo "fuzzed $name for ${seconds}s"
    if ! wait "${pids[$i]}"; then
      failed=1
      tail -n 40 "$logs/$name"
    else
      tail -n 2 "$logs/$name"
    fi
    i=$((i + 1))
  done
}
for ((i = 0; i < ${#fuzzers[@]}; i += 2)); do
  run_pair "${fuzzers[@]:i:2}"
done
exit $failed
