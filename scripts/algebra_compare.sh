#!/usr/bin/env bash
# Set algebra side by side: a redis-server and a 3-node bigsetd cluster on
# loopback (N=3, W=2, R=2, plaintext peers) each load two sets of N
# elements that share half of them (SADDs of 1,000 members through
# redis-cli --pipe), then run SINTERCARD 2 a b, SINTERCARD with LIMIT 100,
# and SINTERSTORE c a b, several times each. Prints each command's median
# time, the ratio (bigsetd over redis: above 1 is slower), and each
# system's peak resident memory (VmHWM: the largest bigsetd node) after
# the load and after the commands. Stops what it started.
#
# Usage: bash scripts/algebra_compare.sh [--elements N] [--runs K]
#          [--bigsetd PATH] [-- bigsetd args]
set -euo pipefail
cd "$(dirname "$0")/.."

elements=1000000
runs=5
bigsetd=""
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --elements) elements="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --bigsetd) bigsetd="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh
# shellcheck source=scripts/cluster_lib.sh
source scripts/cluster_lib.sh
ensure_bigsetd

work=$(mktemp -d /tmp/bigset-algebra-compare.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM




# The largest peak resident memory among the running processes, in kB.
peak_kb() {
  local max=0 kb
  for pid in "${pids[@]}"; do
    kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    [[ "${kb:-0}" -gt "$max" ]] && max="$kb"
  done
  echo "$max"
}

# SADDs of 1,000 members, as RESP, for `redis-cli --pipe`: set a holds
# e0 .. e(N-1), set b e(N/2) .. e(N + N/2 - 1).
python3 - "$elements" >"$work/load.resp" <<'EOF'
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
def emit(key, lo, hi):
    for start in range(lo, hi, 1000):
        members = [b"e%09d" % i for i in range(start, min(start + 1000, hi))]
        parts = [b"SADD", key.encode()] + members
        out.write(b"*%d\r\n" % len(parts))
        for p in parts:
            out.write(b"$%d\r\n%s\r\n" % (len(p), p))
emit("a", 0, n)
emit("b", n // 2, n + n // 2)
EOF

# Median wall time of `runs` runs of a command, in milliseconds.
time_ms() {
  local port="$1"
  shift
  local times=()
  for _ in $(seq 1 "$runs"); do
    local t0 t1
    t0=$(date +%s%N)
    timeout 600 redis-cli -p "$port" "$@" >"$work/last.out"
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

declare -A fig
measure() {
  local sys="$1" port="$2"
  timeout 1200 redis-cli -p "$port" --pipe <"$work/load.resp" >/dev/null
  fig[$sys,card_a]=$(redis-cli -p "$port" scard a)
  fig[$sys,load_peak]=$(peak_kb)
  fig[$sys,sintercard]=$(time_ms "$port" sintercard 2 a b)
  fig[$sys,result]=$(cat "$work/last.out")
  fig[$sys,limit]=$(time_ms "$port" sintercard 2 a b limit 100)
  fig[$sys,store]=$(time_ms "$port" sinterstore c a b)
  fig[$sys,peak]=$(peak_kb)
  echo "$sys: SCARD a ${fig[$sys,card_a]}, SINTERCARD ${fig[$sys,result]}" \
    "in ${fig[$sys,sintercard]} ms, LIMIT 100 in ${fig[$sys,limit]} ms," \
    "SINTERSTORE in ${fig[$sys,store]} ms; peak memory ${fig[$sys,load_peak]}" \
    "kB after the load, ${fig[$sys,peak]} kB after the commands"
}

# redis-server.
read -r rp < <(free_ports 1)
mkdir -p "$work/redis"
redis-server --port "$rp" --bind 127.0.0.1 --dir "$work/redis" --save '' \
  --daemonize no --logfile "$work/redis.log" &
pids+=($!)
wait_for "$rp" PONG ping
measure redis "$rp"
stop_all

# bigsetd.
read -r c1 c2 c3 p1 p2 p3 < <(free_ports 6)
nodes=(--node "1=127.0.0.1:$p1/127.0.0.1:$c1"
       --node "2=127.0.0.1:$p2/127.0.0.1:$c2"
       --node "3=127.0.0.1:$p3/127.0.0.1:$c3")
cs=("$c1" "$c2" "$c3")
ps=("$p1" "$p2" "$p3")
for i in 1 2 3; do
  "$bigsetd" --id "$i" --data "$work/n$i" --listen "127.0.0.1:${cs[$((i-1))]}" \
    --peer-listen "127.0.0.1:${ps[$((i-1))]}" "${nodes[@]}" \
    --plaintext-peers "${extra[@]}" >"$work/n$i.log" 2>&1 &
  pids+=($!)
done
for c in "${cs[@]}"; do wait_for "$c" PONG ping; done
for c in "${cs[@]}"; do wait_for "$c" '^[01]$' sadd __probe__ x; done
redis-cli -p "$c1" del __probe__ >/dev/null
measure bigsetd "$c1"
stop_all

for what in sintercard limit store; do
  printf '%-12s redis %8s ms   bigsetd %8s ms   ratio %s\n' "$what" \
    "${fig[redis,$what]}" "${fig[bigsetd,$what]}" \
    "$(python3 -c "import sys; print(round(int(sys.argv[2]) / max(1, int(sys.argv[1])), 2))" \
        "${fig[redis,$what]}" "${fig[bigsetd,$what]}")"
done
printf 'peak memory  redis %8s kB   bigsetd %8s kB   ratio %s\n' \
  "${fig[redis,peak]}" "${fig[bigsetd,peak]}" \
  "$(python3 -c "import sys; print(round(int(sys.argv[2]) / max(1, int(sys.argv[1])), 2))" \
      "${fig[redis,peak]}" "${fig[bigsetd,peak]}")"
