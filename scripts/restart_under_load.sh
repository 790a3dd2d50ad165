#!/usr/bin/env bash
# How long a node killed with kill -9 and restarted under load takes to
# coordinate a write again. A 3-node bigsetd cluster on loopback with
# --sync-writes (N=3, W=2, R=2, plaintext peers); redis-benchmark writes
# through nodes 2 and 3 (8 clients each, SADDs to 100,000 keys) while node
# 1 is killed and restarted, ROUNDS times; after each restart the script
# sends node 1 an SADD every 0.1 s until one succeeds and prints how long
# that took and the errors seen meanwhile. With --freeze S, node 1 is
# frozen instead (SIGSTOP for S seconds, then SIGCONT), and the time is
# counted from the SIGCONT. Stops what it started.
#
# Usage: bash scripts/restart_under_load.sh [--rounds R] [--freeze S]
#          [--bigsetd PATH] [-- bigsetd args]
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=6
freeze=0
bigsetd=""
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --freeze) freeze="$2"; shift 2 ;;
    --bigsetd) bigsetd="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh
# shellcheck source=scripts/cluster_lib.sh
source scripts/cluster_lib.sh
ensure_bigsetd

work=$(mktemp -d /tmp/bigset-restart.XXXXXX)
declare -A pid
bench=()
cleanup() {
  for p in "${bench[@]}" "${pid[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

read -r c1 c2 c3 p1 p2 p3 < <(free_ports 6)
cs=("" "$c1" "$c2" "$c3")
ps=("" "$p1" "$p2" "$p3")
nodes=(--node "1=127.0.0.1:$p1/127.0.0.1:$c1"
       --node "2=127.0.0.1:$p2/127.0.0.1:$c2"
       --node "3=127.0.0.1:$p3/127.0.0.1:$c3")
start() {
  local i="$1"
  "$bigsetd" --id "$i" --data "$work/n$i" --listen "127.0.0.1:${cs[$i]}" \
    --peer-listen "127.0.0.1:${ps[$i]}" "${nodes[@]}" --plaintext-peers \
    --sync-writes "${extra[@]}" >>"$work/n$i.log" 2>&1 &
  pid[$i]=$!
}
for i in 1 2 3; do start "$i"; done
for i in 1 2 3; do
  for _ in $(seq 1 100); do
    redis-cli -p "${cs[$i]}" ping 2>/dev/null | grep -q PONG && break
    sleep 0.1
  done
done
for i in 2 3; do
  redis-benchmark -p "${cs[$i]}" -c 8 -n 1000000000 -r 100000 -q \
    SADD k__rand_int__ x >/dev/null 2>&1 &
  bench+=($!)
done
sleep 5
for round in $(seq 1 "$rounds"); do
  if [[ "$freeze" != 0 ]]; then
    kill -STOP "${pid[1]}"
    sleep "$freeze"
    kill -CONT "${pid[1]}"
    what="its SIGCONT (frozen ${freeze} s)"
  else
    kill -9 "${pid[1]}"
    wait "${pid[1]}" 2>/dev/null || true
    start 1
    what="its restart"
  fi
  t0=$(date +%s%N)
  : >"$work/errors"
  out=""
  for _ in $(seq 1 1200); do
    out=$(timeout 5 redis-cli -p "$c1" sadd "probe$round" x 2>&1 || true)
    [[ "$out" =~ ^[01]$ ]] && break
    echo "$out" | cut -c1-120 >>"$work/errors"
    sleep 0.1
  done
  t1=$(date +%s%N)
  echo "round $round: node 1 coordinated an SADD $(( (t1 - t0) / 1000000 )) ms after $what"
  sort "$work/errors" | uniq -c | sort -rn | head -3 | sed 's/^/    /'
  sleep 5
done
