#!/usr/bin/env bash
# Installs the Debian 12 packages bigset needs to build, test and benchmark.
# Skips packages that are already installed; uses sudo when not root.
set -euo pipefail

packages=(g++ meson ninja-build pkg-config libleveldb-dev libabsl-dev catch2
          libbenchmark-dev libcli11-dev python3 libasio-dev libssl-dev openssl
          redis-server redis-tools python3-redis gnuplot-nox tcl curl
          etcd-server etcd-client)
if [[ "${BIGSET_WITH_CLANG:-0}" == 1 ]]; then
  packages+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

sudo=""
if [[ "$(id -u)" != 0 ]]; then
  sudo="sudo"
fi
echo "Installing: ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
