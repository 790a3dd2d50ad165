#!/usr/bin/env bash
# Installs dependencies, builds bigset with warnings as errors and runs every
# test. Usage: bash scripts/test.sh [--sanitize]
#   --sanitize   build with clang under AddressSanitizer + UBSan, with
#                clang's thread-safety analysis as errors, and run the tests
#                there. The libFuzzer targets are built too, and the code
#                they drive (the libraries, bigsetd's) carries libFuzzer's
#                coverage instrumentation (meson.build, fuzz_coverage_args),
#                so that a fuzzer sees what it did (scripts/fuzz.sh runs
#                them from here).
# Environment: BIGSET_TEST_SCALE=K multiplies the seeds of randomized tests;
# BIGSET_TEST_SEED_STRIDE=K runs every K-th (3 under --sanitize).
set -euo pipefail
cd "$(dirname "$0")/.."

dir=build-test
suites=()
# -O1 with line tables: half the compile time of -O2 -g on this code (the
# template-heavy tests and tools dominate CI), asserts kept; benchmarks are
# timed in release builds (scripts/bench.sh), and the sanitizer build below
# runs the same tests at -O2.
# Both builds are unity builds (each library and program compiled a few
# sources per unit): a quarter less compile time here, where compiling is
# most of CI; a build of your own (meson setup) stays one unit per source.
args=(-Doptimization=1 -Ddebug=false -Db_ndebug=false -Dcpp_args=-g1
      -Dwerror=true -Dunity=on)
if [[ "${1:-}" == "--sanitize" ]]; then
  BIGSET_WITH_CLANG=1 bash scripts/install-deps.sh
  dir=build-asan
  # -O2 with line tables only (what the sanitizers' reports need): full
  # debug information made this build, CI's longest step, 15% slower.
  args=(-Doptimization=2 -Ddebug=false -Db_ndebug=false -Dwerror=true
        -Dunity=on -Db_sanitize=address,undefined -Db_lundef=false
        "-Dcpp_args=-gline-tables-only -fno-sanitize-recover=all -fno-omit-frame-pointer -Wthread-safety -Wthread-safety-beta")
  export CXX=clang++
  # Every third seed of the randomized tests: the plain build runs them all.
  export BIGSET_TEST_SEED_STRIDE="${BIGSET_TEST_SEED_STRIDE:-3}"
  # Without the three process tests that move the most data (suite
  # `heavy`, tests/bigsetd/meson.build): the plain build runs them.
  suites=(--no-suite heavy)
else
  bash scripts/install-deps.sh
fi
if [[ "$dir" == build-asan && -f "$dir/build.ninja" ]] &&
   { ! grep -q "gline-tables-only" "$dir/build.ninja" ||
     grep -q "thread-safety-beta -fsanitize=fuzzer-no-link" "$dir/build.ninja"; }; then
  rm -rf "$dir"  # Made by an older version of this script.
fi
if [[ "$dir" == build-test && -f "$dir/build.ninja" ]] &&
   ! grep -q -- "-g1" "$dir/build.ninja"; then
  rm -rf "$dir"  # Made by an older version of this script (-O2 -g).
fi
if [[ -f "$dir/build.ninja" ]] && ! grep -q -- "-unity0" "$dir/build.ninja"; then
  meson configure "$dir" -Dunity=on >/dev/null  # Made before unity builds.
fi
if [[ ! -f "$dir/build.ninja" ]]; then
  meson setup "$dir" "${args[@]}" >/dev/null
fi
if [[ "$dir" == build-asan ]]; then
  # Everything but the benchmarks (timed in release builds only).
  targets=$(meson introspect "$dir" --targets | python3 -c '
import json, os, sys
build = sys.argv[1]
src = os.path.dirname(os.path.abspath(build))
for t in json.load(sys.stdin):
    where = os.path.relpath(t["defined_in"], src)
    if not where.startswith("benchmarks") and t["type"] != "custom":
        for f in t["filename"]:
            print(os.path.relpath(f, build))' "$dir")
  # shellcheck disable=SC2086
  ninja -C "$dir" $targets
else
  ninja -C "$dir"
fi
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 \
  "${suites[@]}"
