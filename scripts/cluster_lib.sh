# Shell helpers the scripts that start redis-server or bigsetd on loopback
# share (source it; it defines functions only). The caller keeps the pids
# it starts in the array `pids`.

# Builds bigsetd (release, in build/) unless $bigsetd names one; sets it.
ensure_bigsetd() {
  if [[ -z "${bigsetd:-}" ]]; then
    if [[ ! -f build/build.ninja ]]; then
      meson setup build --buildtype=release >/dev/null
    fi
    ninja -C build tools/bigsetd/bigsetd >/dev/null
    bigsetd=build/tools/bigsetd/bigsetd
  fi
}

# Free loopback ports, as many as asked.
free_ports() {
  python3 -c '
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

# Waits until `redis-cli -p PORT ARGS...` prints something matching RE.
wait_for() {
  local port="$1" re="$2"
  shift 2
  for _ in $(seq 1 300); do
    if redis-cli -p "$port" "$@" 2>/dev/null | grep -qE "$re"; then return 0; fi
    sleep 0.1
  done
  echo "timed out waiting for port $port ($*)" >&2
  return 1
}

# Stops every process in `pids` (TERM, then KILL after 10 s).
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  pids=()
}
