#!/usr/bin/env bash
# bigsetd side by side with the Redis it replaces, on this machine, with the
# same redis-benchmark runs (docs/BENCHMARKS.md, "bigsetd against Redis").
#
# Redis: a durable primary (appendonly yes, appendfsync everysec) with two
# replicas. bigsetd: three nodes, N=3 W=2 R=2, plaintext peers. All on
# loopback. Each round starts both afresh and runs, on each in turn:
#
#   SADD pipelined     redis-benchmark -c 50 -P 16 -r 10000000 -n N SADD s __rand_int__
#   SISMEMBER piped    the same with SISMEMBER, on the set that run made
#   SADD one client    redis-benchmark -c 1 -r 10000000 -n M SADD s1 __rand_int__
#   memory             resident memory of the Redis primary and of each
#                      bigsetd node after those runs (about N adds)
#
# and prints each figure, then the medians over the rounds and their
# ratios (bigsetd over Redis; for memory, bigsetd's largest node over the
# primary). With --big-elements K (default 0: skipped) a last step loads a
# fresh bigsetd cluster with K distinct elements (redis-py, SADDs of 1,000
# members), printing its largest node's memory every million.
#
# Usage: bash scripts/redis_compare.sh [--rounds R] [--requests N]
#          [--single M] [--big-elements K] [--bigsetd PATH] [-- bigsetd args]
# Every process it starts binds 127.0.0.1 and is stopped (by pid) when the
# script ends, also on failure or interrupt.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3
requests=1000000
single=20000
big=0
bigsetd=""
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --requests) requests="$2"; shift 2 ;;
    --single) single="$2"; shift 2 ;;
    --big-elements) big="$2"; shift 2 ;;
    --bigsetd) bigsetd="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh
# shellcheck source=scripts/cluster_lib.sh
source scripts/cluster_lib.sh
ensure_bigsetd

work=$(mktemp -d /tmp/bigset-redis-compare.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM



rss_kb() { ps -o rss= -p "$1" | tr -d ' '; }


start_redis() {
  read -r p r1 r2 < <(free_ports 3)
  local d="$work/redis"
  rm -rf "$d"
  mkdir -p "$d/p" "$d/r1" "$d/r2"
  redis-server --port "$p" --bind 127.0.0.1 --dir "$d/p" --appendonly yes \
    --appendfsync everysec --save '' --daemonize no --logfile "$d/p.log" &
  pids+=($!)
  wait_for "$p" PONG ping
  local i=0
  for r in "$r1" "$r2"; do
    i=$((i + 1))
    redis-server --port "$r" --bind 127.0.0.1 --dir "$d/r$i" --save '' \
      --replicaof 127.0.0.1 "$p" --daemonize no --logfile "$d/r$i.log" &
    pids+=($!)
  done
  wait_for "$r1" 'master_link_status:up' info replication
  wait_for "$r2" 'master_link_status:up' info replication
  port="$p"
  main_pid="${pids[0]}"
}

start_bigsetd() {
  read -r c1 c2 c3 p1 p2 p3 < <(free_ports 6)
  local d="$work/bigsetd"
  rm -rf "$d"
  mkdir -p "$d"
  local nodes=(--node "1=127.0.0.1:$p1/127.0.0.1:$c1"
               --node "2=127.0.0.1:$p2/127.0.0.1:$c2"
               --node "3=127.0.0.1:$p3/127.0.0.1:$c3")
  local cs=("$c1" "$c2" "$c3") ps=("$p1" "$p2" "$p3")
  for i in 1 2 3; do
    "$bigsetd" --id "$i" --data "$d/n$i" --listen "127.0.0.1:${cs[$((i-1))]}" \
      --peer-listen "127.0.0.1:${ps[$((i-1))]}" "${nodes[@]}" \
      --plaintext-peers "${extra[@]}" >"$d/n$i.log" 2>&1 &
    pids+=($!)
  done
  for c in "${cs[@]}"; do wait_for "$c" PONG ping; done
  # Every node coordinates writes (its peers connected).
  for c in "${cs[@]}"; do wait_for "$c" '^[01]$' sadd __probe__ x; done
  redis-cli -p "$c1" del __probe__ >/dev/null
  port="$c1"
  main_pid="${pids[0]}"
}

# requests per second of one redis-benchmark run.
bench() {
  redis-benchmark -p "$port" "$@" 2>&1 | tr '\r' '\n' |
    sed -n 's/.*throughput summary: \([0-9.]*\) requests per second.*/\1/p' |
    tail -1
}

declare -A fig
for round in $(seq 1 "$rounds"); do
  for sys in redis bigsetd; do
    "start_$sys"
    sadd=$(bench -c 50 -P 16 -r 10000000 -n "$requests" SADD s __rand_int__)
    sism=$(bench -c 50 -P 16 -r 10000000 -n "$requests" SISMEMBER s __rand_int__)
    one=$(bench -c 1 -r 10000000 -n "$single" SADD s1 __rand_int__)
    if [[ "$sys" == redis ]]; then
      mem=$(rss_kb "$main_pid")
    else
      mem=0
      for pid in "${pids[@]}"; do
        m=$(rss_kb "$pid")
        ((m > mem)) && mem=$m
      done
    fi
    card=$(redis-cli -p "$port" scard s)
    echo "round $round $sys: SADD pipelined ${sadd}/s, SISMEMBER pipelined" \
         "${sism}/s, SADD one client ${one}/s, memory ${mem} kB" \
         "(${card} elements)"
    fig[$sys,sadd]+="$sadd "
    fig[$sys,sism]+="$sism "
    fig[$sys,one]+="$one "
    fig[$sys,mem]+="$mem "
    stop_all
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
row() {  # name key unit
  local r b
  r=$(echo "${fig[redis,$2]}" | median)
  b=$(echo "${fig[bigsetd,$2]}" | median)
  python3 -c 'import sys; r, b = float(sys.argv[2]), float(sys.argv[3]);
print("%-28s redis %12.0f %s   bigsetd %12.0f %s   ratio %.3f" % (sys.argv[1], r, sys.argv[4], b, sys.argv[4], b / r if r else 0))' "$1" "$r" "$b" "$3"
}
echo "medians of $rounds rounds (ratio: bigsetd / redis)"
row "SADD pipelined -c 50 -P 16" sadd "/s"
row "SISMEMBER pipelined -c 50 -P 16" sism "/s"
row "SADD one client -c 1" one "/s"
row "memory after ~$requests adds" mem "kB"

if [[ "$big" -gt 0 ]]; then
  start_bigsetd
  loaded=0
  step=1000000
  # One client, SADDs of 1,000 distinct new members, 16 in flight (redis-py's
  # pipeline), a million at a time.
  while ((loaded < big)); do
    n=$((big - loaded < step ? big - loaded : step))
    # Debian's python3, which has python3-redis (not a pyenv's).
    /usr/bin/python3 -c '
import redis, sys
port, first, n = (int(a) for a in sys.argv[1:])
r = redis.Redis(port=port)
done = 0
while done < n:
    p = r.pipeline(transaction=False)
    for _ in range(16):
        if done >= n:
            break
        k = min(1000, n - done)
        p.sadd("big", *("m%d" % (first + done + i) for i in range(k)))
        done += k
    p.execute()' "$port" "$loaded" "$n"
    loaded=$((loaded + n))
    mem=0
    for pid in "${pids[@]}"; do
      m=$(rss_kb "$pid")
      ((m > mem)) && mem=$m
    done
    echo "bigsetd memory with $(redis-cli -p "$port" scard big) elements: $mem kB (largest node)"
  done
  stop_all
fi
