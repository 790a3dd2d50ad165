#!/usr/bin/env bash
# Installs dependencies, builds bigset in release mode and runs the main
# example. Usage: bash scripts/demo.sh [example arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
if [[ ! -f build-release/build.ninja ]]; then
  meson setup build-release --buildtype=release >/dev/null
fi
ninja -C build-release examples/bigset_demo >/dev/null
exec ./build-release/examples/bigset_demo "$@"
