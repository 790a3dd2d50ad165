#!/usr/bin/env python3
"""bigset-load end to end: every target runs a short mixed load and writes
a well-formed CSV whose total counts every operation with no error; the
RESP target drives a redis-server started here on 127.0.0.1 (stopped by
pid at the end, also on failure).

Usage: load_test.py BIGSET_LOAD
"""

import csv
import io
import os
import signal
import socket
import subprocess
import sys
import time

# The loopback ports of the other process tests (tests/bigsetd/harness.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "bigsetd"))
from harness import free_port  # noqa: E402

LOAD = sys.argv[1]
COLUMNS = ["elapsed_s", "ops", "ops_per_s", "mean_us", "p95_us", "p99_us",
           "max_us", "errors", "adds", "rss_bytes"]


def run(*args):
    out = subprocess.run([LOAD] + list(args), capture_output=True,
                         timeout=120)
    if out.returncode != 0:
        raise SystemExit("FAIL %s: exit %d\n%s" %
                         (args, out.returncode, out.stderr.decode()))
    rows = list(csv.reader(io.StringIO(out.stdout.decode())))
    if rows[0] != COLUMNS:
        raise SystemExit("FAIL %s: header %r" % (args, rows[0]))
    total = dict(zip(COLUMNS, rows[-1]))
    if total["elapsed_s"] != "total":
        raise SystemExit("FAIL %s: no total line" % (args,))
    for row in rows[1:]:
        if len(row) != len(COLUMNS):
            raise SystemExit("FAIL %s: row %r" % (args, row))
        p95, p99, mx = (float(row[4]), float(row[5]), float(row[6]))
        if not (p95 <= p99 <= mx * 1.0001 + 0.01):
            raise SystemExit("FAIL %s: percentiles out of order %r" %
                             (args, row))
    return total


def main():
    mix = "add:50,remove:10,contains:15,range:10,read:5,count:10"
    for target in ["local", "onevalue", "onevalue-delta"]:
        t = run("--target", target, "--ops", "600", "--mix", mix, "--sets",
                "5", "--keys", "pareto", "--preload", "20", "--workers", "2",
                "--interval-ms", "100")
        if int(t["ops"]) != 600 or int(t["errors"]) != 0:
            raise SystemExit("FAIL %s: %r" % (target, t))
        print("PASS", target)
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise SystemExit("FAIL: redis-server did not start")
                time.sleep(0.1)
        t = run("--target", "resp", "--address", "127.0.0.1:%d" % port,
                "--server-pid", str(server.pid), "--ops", "600", "--mix", mix,
                "--sets", "5", "--preload", "20", "--interval-ms", "100")
        if int(t["ops"]) != 600 or int(t["errors"]) != 0 or \
                int(t["rss_bytes"]) == 0:
            raise SystemExit("FAIL resp: %r" % t)
        print("PASS resp")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    # Bad options: exit code 2, nothing run.
    bad = subprocess.run([LOAD, "--mix", "nope:1"], capture_output=True,
                         timeout=30)
    if bad.returncode != 2:
        raise SystemExit("FAIL bad --mix: exit %d" % bad.returncode)
    print("PASS options")


if __name__ == "__main__":
    main()
