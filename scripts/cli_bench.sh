#!/usr/bin/env bash
# The CLI bulk-load figure: `bigset add SET -` loading 1,000,000 random
# 16-byte elements (given as hex, one per line) from a file, in elements per
# second, as a ratio against BM_InsertThroughput/bigset measured right after
# on the same (release) build. Usage: bash scripts/cli_bench.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."

n="${1:-1000000}"
bash scripts/install-deps.sh
if [[ ! -f build-release/build.ninja ]]; then
  meson setup build-release --buildtype=release >/dev/null
fi
ninja -C build-release tools/bigset benchmarks/bigset_bench >/dev/null

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 - "$n" "$tmp/elements.hex" <<'PY'
import random, sys
n, path = int(sys.argv[1]), sys.argv[2]
rng = random.Random(1)
with open(path, "w") as f:
    for _ in range(n):
        f.write("%032x\n" % rng.getrandbits(128))
PY
start=$(date +%s.%N)
./build-release/tools/bigset --db "$tmp/db" --create --hex --no-progress \
  add "$(printf bench | od -An -tx1 | tr -d ' \n')" - \
  < "$tmp/elements.hex" >/dev/null
end=$(date +%s.%N)
count=$(./build-release/tools/bigset --db "$tmp/db" --no-progress count bench)
if [[ "$count" != "$n" ]]; then
  echo "loaded $count elements, expected $n" >&2
  exit 1
fi
./build-release/benchmarks/bigset_bench \
  --benchmark_filter='^BM_InsertThroughput/bigset$' \
  --benchmark_out="$tmp/bench.json" --benchmark_out_format=json >/dev/null
python3 - "$n" "$start" "$end" "$tmp/bench.json" <<'PY'
import json, sys
n, start, end = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
cli = n / (end - start)
bench = json.load(open(sys.argv[4]))["benchmarks"]
lib = [b for b in bench if b["name"] == "BM_InsertThroughput/bigset"][0]
lib_rate = lib["items_per_second"]
print("bigset add SET - (%d elements, wall clock): %.0f elements/s" % (n, cli))
print("BM_InsertThroughput/bigset: %.0f elements/s" % lib_rate)
print("ratio: %.2f (target >= 0.8)" % (cli / lib_rate))
PY
