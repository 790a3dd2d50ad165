#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for
# SECONDS seconds (default 30). Usage: bash scripts/fuzz.sh [SECONDS]
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
  # Coverage instrumentation in every unit, not only in the fuzzers' own:
  # the decoders they drive live in the libraries.
  CXX=clang++ meson setup build-fuzz --buildtype=debugoptimized \
    -Db_sanitize=address,undefined -Db_lundef=false \
    -Dcpp_args=-fsanitize=fuzzer-no-link >/dev/null
fi
fuzzers=(tests/message_fuzzer tests/delta_fuzzer tests/clock_fuzzer
         tests/key_fuzzer tests/bigsetd/resp_fuzzer
         tests/bigsetd/cluster_map_fuzzer)
ninja -C "$dir" "${fuzzers[@]}"
for f in "${fuzzers[@]}"; do
  name=$(basename "$f")
  mkdir -p "$dir/corpus/$name"
  echo "fuzzing $name for ${seconds}s"
  "./$dir/$f" -max_total_time="$seconds" -print_final_stats=0 \
    "$dir/corpus/$name" 2>&1 | tail -n 2
done
