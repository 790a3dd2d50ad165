#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for
# SECONDS seconds (default 30). Usage: bash scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"

BIGSET_WITH_CLANG=1 bash scripts/install-deps.sh
if [[ ! -f build-fuzz/build.ninja ]]; then
  CXX=clang++ meson setup build-fuzz --buildtype=debugoptimized \
    -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
ninja -C build-fuzz tests/message_fuzzer tests/delta_fuzzer tests/clock_fuzzer \
  tests/key_fuzzer tests/bigsetd/resp_fuzzer tests/bigsetd/cluster_map_fuzzer
for f in tests/message_fuzzer tests/delta_fuzzer tests/clock_fuzzer \
         tests/key_fuzzer tests/bigsetd/resp_fuzzer \
         tests/bigsetd/cluster_map_fuzzer; do
  name=$(basename "$f")
  mkdir -p "build-fuzz/corpus/$name"
  echo "fuzzing $name for ${seconds}s"
  ./build-fuzz/$f -max_total_time="$seconds" -print_final_stats=0 \
    "build-fuzz/corpus/$name" 2>&1 | tail -n 2
done
