#!/usr/bin/env bash
# Reproduces the paper's tables and figures on this code, beside the
# baselines, and regenerates docs/REPORT.md with its plots (docs/report/).
#
# Usage: bash scripts/report.sh [--quick] [--build DIR] [--out DIR] [--md FILE]
#                                [--only SYSTEMS]
#   --quick   CI sizes (a few minutes); default: the paper's sizes (hours)
#   --only    measure only these systems (e.g. bigsetd,redis: minutes); the
#             others' rows come from the CSVs an earlier run left in OUT
#   --build   an existing build directory to use (default: build-release,
#             configured and built here)
#   --out     where the CSVs and images go (default docs/report)
#   --md      the report (default docs/REPORT.md)
set -euo pipefail
cd "$(dirname "$0")/.."

mode=full
build=""
out=docs/report
md=docs/REPORT.md
only=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) mode=quick; shift ;;
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --md) md="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    *) echo "usage: bash scripts/report.sh [--quick] [--build DIR] [--out DIR] [--md FILE] [--only SYSTEMS]" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh
if [[ -z "$build" ]]; then
  build=build-release
  if [[ ! -f "$build/build.ninja" ]]; then
    meson setup "$build" --buildtype=release >/dev/null
  fi
fi
ninja -C "$build" tools/bigset_load/bigset-load tools/bigsetd/bigsetd >/dev/null
mkdir -p "$out" "$(dirname "$md")"
python3 scripts/report.py --mode "$mode" --build "$build" --out "$out" --md "$md" \
  --only "$only"

# Every table and image must be there.
for f in fig1 latency memory kill9; do
  for ext in png svg; do
    [[ -s "$out/$f.$ext" ]] || { echo "report: $out/$f.$ext missing" >&2; exit 1; }
  done
done
for t in "## Table 1" "## Table 2" "## What to remember"; do
  grep -q "$t" "$md" || { echo "report: '$t' missing from $md" >&2; exit 1; }
done
echo "report: $md and $out/ written"
