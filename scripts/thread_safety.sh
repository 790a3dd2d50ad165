#!/usr/bin/env bash
# Builds the library and the tests with clang's thread-safety analysis as an
# error: every ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED is checked.
# Usage: bash scripts/thread_safety.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BIGSET_WITH_CLANG=1 bash scripts/install-deps.sh
dir=build-tsa
if [[ ! -f "$dir/build.ninja" ]]; then
  CXX=clang++ meson setup "$dir" --buildtype=debug -Dwerror=true \
    "-Dcpp_args=-Wthread-safety -Wthread-safety-beta" >/dev/null
fi
# The libraries and the tests (which hold the test stores' locks); not the
# benchmarks, which take no locks of their own.
targets=$(meson introspect "$dir" --targets | python3 -c '
import json, os, sys
build = sys.argv[1]
src = os.path.dirname(os.path.abspath(build))
for t in json.load(sys.stdin):
    where = os.path.relpath(t["defined_in"], src)
    if where.startswith(("lib", "tests")) and t["type"] != "custom":
        for f in t["filename"]:
            print(os.path.relpath(f, build))' "$dir")
ninja -C "$dir" $targets
echo "thread-safety analysis: clean"
