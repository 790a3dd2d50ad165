#!/usr/bin/env bash
# Compares two revisions side by side in one run: builds each (release) in
# a temporary worktree, then runs the same benchmarks alternately, A then B,
# five repetitions each, and prints per benchmark the medians of A and B and
# their ratio (B over A: above 1 is faster for throughputs, slower for
# times). Alternating keeps a noisy machine's drift out of the ratio.
#
# Usage: bash scripts/bench_compare.sh REV_A REV_B [FILTER] [ROUNDS]
#   FILTER  a --benchmark_filter regex (default: the hot paths issue
#           "Fast paths" names)
#   ROUNDS  alternations (default 5: five repetitions of each)
# BENCH_COMPARE_KEEP=DIR keeps every run's JSON there (a-1.json, b-1.json, ...).
# Example: bash scripts/bench_compare.sh HEAD~3 HEAD 'BM_InsertThroughput'
set -euo pipefail
cd "$(dirname "$0")/.."
rev_a="$1"
rev_b="$2"
filter="${3:-BM_InsertThroughput/(bigset|rawleveldb)$|BM_FullRead/(bigset|rawleveldb)/1000000|BM_Contains/bigset/1000000|BM_Get/rawleveldb/1000000|BM_ClusterInsert}"
rounds="${4:-5}"

bash scripts/install-deps.sh
source scripts/worktree_pair.sh
before_cleanup() {
  if [[ -n "${BENCH_COMPARE_KEEP:-}" ]]; then
    mkdir -p "$BENCH_COMPARE_KEEP"
    cp "$work"/*.json "$BENCH_COMPARE_KEEP"/ 2>/dev/null || true
  fi
}
build_side() {  # SIDE REV, in the side's worktree
  meson setup build --buildtype=release >/dev/null
  ninja -C build benchmarks/bigset_bench >/dev/null
  # The network benchmarks run nodes as node_process processes.
  if ninja -C build -t targets all | grep -q '^tests/network/node_process:'; then
    ninja -C build tests/network/node_process >/dev/null
  fi
  echo "built $1 = $(git rev-parse --short "$2")" >&2
}
worktree_pair bigset-compare "$rev_a" "$rev_b" build_side

for ((i = 1; i <= rounds; i++)); do
  for side in a b; do
    echo "round $i/$rounds: $side" >&2
    "$work/$side/build/benchmarks/bigset_bench" \
      --benchmark_filter="$filter" \
      --benchmark_out="$work/$side-$i.json" --benchmark_out_format=json \
      >/dev/null 2>&1
  done
done

python3 - "$work" "$rounds" "$rev_a" "$rev_b" <<'EOF'
import json, re, statistics, sys
work, rounds, rev_a, rev_b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def load(side):
    runs = {}
    for i in range(1, rounds + 1):
        with open(f"{work}/{side}-{i}.json") as f:
            for b in json.load(f)["benchmarks"]:
                name = re.sub(r"/iterations:\d+", "", b["name"])
                if "items_per_second" in b:
                    value, unit = b["items_per_second"], "items/s"
                else:
                    value, unit = b["real_time"], b["time_unit"]
                runs.setdefault(name, (unit, []))[1].append(value)
    return {n: (u, statistics.median(v)) for n, (u, v) in runs.items()}

def figures(side):
    """The issue's figures: ratios within one run, medians over the runs."""
    ratios = {}
    for i in range(1, rounds + 1):
        with open(f"{work}/{side}-{i}.json") as f:
            by = {re.sub(r"/iterations:\d+", "", x["name"]): x
                  for x in json.load(f)["benchmarks"]}
        def ips(n):
            return by[n]["items_per_second"]
        def real(n):
            return by[n]["real_time"]
        rows = [
            ("insert bigset / raw (items/s)", lambda: ips("BM_InsertThroughput/bigset") / ips("BM_InsertThroughput/rawleveldb")),
            ("full read bigset / raw (items/s)", lambda: ips("BM_FullRead/bigset/1000000") / ips("BM_FullRead/rawleveldb/1000000")),
            ("contains / raw get (time)", lambda: by["BM_Contains/bigset/1000000"]["cpu_time"] / by["BM_Get/rawleveldb/1000000"]["cpu_time"]),
            ("hand-off: ceiling / hand-off (real time)", lambda: real("BM_HandOffCeiling/rawleveldb/1000000") / real("BM_HandOff/1000000")),
            ("full exchange: ceiling / exchange (real time)", lambda: real("BM_HandOffCeiling/rawleveldb/1000000") / real("BM_AntiEntropy/full/1000000")),
            ("cluster insert / floor (items/s)", lambda: ips("BM_ClusterInsert/n:3/w:2") / ips("BM_ClusterInsertFloor/three_replicas")),
        ]
        for label, f in rows:
            try:
                value = f()  # KeyError: the filter left a benchmark out.
            except KeyError:
                continue
            ratios.setdefault(label, []).append(value)
    return {k: statistics.median(v) for k, v in ratios.items()}

a, b = load("a"), load("b")
print(f"medians of {rounds}, A = {rev_a}, B = {rev_b}")
print(f"{'benchmark':<52} {'A':>14} {'B':>14} {'B/A':>7}")
for name in sorted(set(a) & set(b)):
    unit, va = a[name]
    _, vb = b[name]
    print(f"{name:<52} {va:>14.4g} {vb:>14.4g} {vb / va:>7.3f}  {unit}")
fa, fb = figures("a"), figures("b")
if fa or fb:
    print()
    print("figures within each run (medians):")
    print(f"{'figure':<52} {'A':>14} {'B':>14}")
    for label in fa:
        if label in fb:
            print(f"{label:<52} {fa[label]:>14.3f} {fb[label]:>14.3f}")
EOF
