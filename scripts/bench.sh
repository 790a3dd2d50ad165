#!/usr/bin/env bash
# Builds (release), runs every benchmark once and prints the figures the
# issues ask for as ratios against their baselines from the same run.
# Usage: bash scripts/bench.sh [extra Google Benchmark flags]
# The raw results are left in build-release/bench.json.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
if [[ ! -f build-release/build.ninja ]]; then
  meson setup build-release --buildtype=release >/dev/null
fi
ninja -C build-release benchmarks/bigset_bench >/dev/null
./build-release/benchmarks/bigset_bench --benchmark_out=build-release/bench.json \
  --benchmark_out_format=json "$@"
python3 scripts/bench_ratios.py build-release/bench.json
