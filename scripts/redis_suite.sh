#!/usr/bin/env bash
# Runs Redis's own test suite for sets (7.0.15, tests/unit/type/set.tcl)
# against a 3-node bigsetd cluster on loopback (N=3, W=2, R=2, plaintext
# peers), in the harness's external-server mode, and, with --redis, against
# a redis-server side by side. Prints each run's counts and ends with one
# line per run: "<system>: N passed, N failed, N ignored".
#
# The suite comes from Debian's source package of redis (the orig tarball
# from deb.debian.org, checked against its SHA-256), kept in
# ~/.cache/bigset. The harness runs on tclsh (package tcl).
#
# Options the harness gets: --singledb (bigsetd has database 0 only)
# --ignore-encoding (bigset has one encoding) --tags -needs:debug (no DEBUG)
# --durable (a test that fails with an error, such as the ones that create
# another data type, counts as failed instead of ending the run).
#
# Usage: bash scripts/redis_suite.sh [--bigsetd PATH] [--redis]
#          [--file unit/type/set] [--min-passed N]
#   --min-passed N   exit 1 if bigsetd passes fewer than N tests (CI: 76)
set -euo pipefail
cd "$(dirname "$0")/.."

bigsetd=""
with_redis=0
file=unit/type/set
min_passed=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bigsetd) bigsetd="$2"; shift 2 ;;
    --redis) with_redis=1; shift ;;
    --file) file="$2"; shift 2 ;;
    --min-passed) min_passed="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh  # tcl (the harness) and curl among them.
# shellcheck source=scripts/cluster_lib.sh
source scripts/cluster_lib.sh
ensure_bigsetd
bigsetd=$(realpath "$bigsetd")

# The suite.
version=7.0.15
sha256=4b1dc4ee6d622a09fff9c6777191209750fb5e5a725ef78ea012d6eef4c22982
cache="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/bigset"
suite="$cache/redis-$version"
if [[ ! -f "$suite/tests/test_helper.tcl" ]]; then
  mkdir -p "$cache"
  tarball="$cache/redis_$version.orig.tar.gz"
  curl -sSf -o "$tarball.part" \
    "http://deb.debian.org/debian/pool/main/r/redis/redis_$version.orig.tar.gz"
  echo "$sha256  $tarball.part" | sha256sum -c --quiet
  mv "$tarball.part" "$tarball"
  rm -rf "$suite"
  mkdir -p "$suite"
  tar -xzf "$tarball" -C "$suite" --strip-components=1 \
    "redis-$version/tests" "redis-$version/runtest"
fi

work=$(mktemp -d /tmp/bigset-redis-suite.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM




# Runs the suite against PORT; prints the counts, returns them in `counts`.
run_suite() {
  local port="$1" name="$2" out="$work/$2.out"
  (cd "$suite" &&
     timeout 1200 tclsh tests/test_helper.tcl --host 127.0.0.1 --port "$port" \
       --singledb --ignore-encoding --tags -needs:debug --durable \
       --clients 1 --timeout 600 --single "$file") >"$out" 2>&1 || true
  local clean="$work/$name.clean"
  sed 's/\x1b\[[0-9;]*m//g' "$out" >"$clean"
  local ok err ignored
  ok=$(grep -c '^\[ok\]' "$clean" || true)
  err=$(grep -cE '^\[(err|exception|timeout)\]' "$clean" || true)
  ignored=$(grep -cE '^\[(ignore|skip)\]' "$clean" || true)
  grep -E '^\[(err|exception|timeout)\]' "$clean" | sed "s/^/  $name /" || true
  counts="$ok passed, $err failed, $ignored ignored"
}

results=()
read -r c1 c2 c3 p1 p2 p3 < <(free_ports 6)
nodes=(--node "1=127.0.0.1:$p1/127.0.0.1:$c1"
       --node "2=127.0.0.1:$p2/127.0.0.1:$c2"
       --node "3=127.0.0.1:$p3/127.0.0.1:$c3")
cs=("$c1" "$c2" "$c3")
ps=("$p1" "$p2" "$p3")
for i in 1 2 3; do
  "$bigsetd" --id "$i" --data "$work/n$i" --listen "127.0.0.1:${cs[$((i-1))]}" \
    --peer-listen "127.0.0.1:${ps[$((i-1))]}" "${nodes[@]}" \
    --plaintext-peers >"$work/n$i.log" 2>&1 &
  pids+=($!)
done
for c in "${cs[@]}"; do wait_for "$c" PONG ping; done
for c in "${cs[@]}"; do wait_for "$c" '^[01]$' sadd __probe__ x; done
redis-cli -p "$c1" del __probe__ >/dev/null
run_suite "$c1" bigsetd
results+=("bigsetd: $counts")
bigsetd_passed=${counts%% *}
stop_all

if [[ "$with_redis" == 1 ]]; then
  read -r rp < <(free_ports 1)
  mkdir -p "$work/redis"
  redis-server --port "$rp" --bind 127.0.0.1 --dir "$work/redis" --save '' \
    --daemonize no --logfile "$work/redis.log" &
  pids+=($!)
  wait_for "$rp" PONG ping
  run_suite "$rp" redis-server
  results+=("redis-server: $counts")
  stop_all
fi

for r in "${results[@]}"; do echo "$r"; done
if [[ "$bigsetd_passed" -lt "$min_passed" ]]; then
  echo "bigsetd passed $bigsetd_passed tests, fewer than $min_passed" >&2
  exit 1
fi
