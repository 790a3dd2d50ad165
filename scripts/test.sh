#!/usr/bin/env bash
# Installs dependencies, builds bigset with warnings as errors and runs every
# test. Usage: bash scripts/test.sh [--sanitize]
#   --sanitize   build and test under AddressSanitizer + UBSan instead.
# Environment: BIGSET_TEST_SCALE=K multiplies the seeds of randomized tests.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

dir=build-test
args=(--buildtype=debugoptimized -Dwerror=true)
if [[ "${1:-}" == "--sanitize" ]]; then
  dir=build-asan
  args+=(-Db_sanitize=address,undefined -Db_lundef=false
         "-Dcpp_args=-fno-sanitize-recover=all -fno-omit-frame-pointer")
fi
if [[ ! -f "$dir/build.ninja" ]]; then
  meson setup "$dir" "${args[@]}" >/dev/null
fi
ninja -C "$dir"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
meson test -C "$dir" --print-errorlogs --num-processes 2
