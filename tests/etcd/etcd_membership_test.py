#!/usr/bin/env python3
"""Membership decided in etcd (bigsetd --membership etcd), tested with a real
etcd (Debian's etcd-server) and real bigsetd processes on 127.0.0.1.

Tests:
  concurrent_changes  20 rounds of two BIGSET.CLUSTER changes sent at the
                      same moment to two different nodes, while clients
                      write: the same one of a conflicting pair succeeds
                      everywhere, independent pairs both apply in order,
                      every node installs the same ring for every epoch,
                      and every acknowledged write is there afterwards.
  etcd_outage         etcd killed (-9) during writes: writes go on, a
                      change fails clearly, a node restarted meanwhile
                      serves from its saved ring; etcd back: the change
                      goes through and every node converges.
  node_down           a node down during two changes catches up from etcd
                      when it restarts.
  tls                 etcd with TLS and client certificates
                      (--client-cert-auth), bigsetd with --etcd-tls-dir.
  refusals            bad --etcd-* settings exit 2 with a clear message;
                      INSTALL is refused; a change of a non-member fails.

Usage: /usr/bin/python3 etcd_membership_test.py BIGSETD MAKE_CERTS TEST
       (TEST "all" runs every test)

Every process a test starts (etcd, bigsetd) is stopped by pid when the
test ends, also when it fails; every wait is bounded.
"""

import base64
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "bigsetd"))
import bigsetd_test as bt  # noqa: E402 (the cluster harness)
from bigsetd_test import Failure, check, eq, wait_for  # noqa: E402

SEED = 20261129
ETCD = "/usr/bin/etcd"
PREFIX = "/bigset/test"


class Etcd:
    """One etcd member on loopback, in its own directory; plain HTTP, or
    TLS with client certificates when `certs` is given."""

    def __init__(self, certs=None):
        if not os.access(ETCD, os.X_OK):
            raise Failure("%s is missing (Debian: etcd-server)" % ETCD)
        self.dir = bt.tmpdir()
        self.port = bt.free_port()
        self.peer_port = bt.free_port()
        self.certs = certs
        self.proc = None
        self.log = os.path.join(self.dir, "etcd.log")

    def endpoint(self):
        return "127.0.0.1:%d" % self.port

    def start(self):
        scheme = "https" if self.certs else "http"
        client = "%s://127.0.0.1:%d" % (scheme, self.port)
        peer = "http://127.0.0.1:%d" % self.peer_port
        cmd = [ETCD, "--name", "t", "--data-dir",
               os.path.join(self.dir, "data"),
               "--listen-client-urls", client,
               "--advertise-client-urls", client,
               "--listen-peer-urls", peer,
               "--initial-advertise-peer-urls", peer,
               "--initial-cluster", "t=" + peer]
        if self.certs:
            cmd += ["--cert-file", os.path.join(self.certs, "server.pem"),
                    "--key-file", os.path.join(self.certs, "server.key"),
                    "--trusted-ca-file", os.path.join(self.certs, "ca.pem"),
                    "--client-cert-auth"]
        # A restart reuses the ports it had. One may be held for an instant
        # by another test probing ports (harness.free_port binds to check):
        # etcd then exits with "address already in use", and trying again a
        # moment later is what an operator would do.
        for attempt in range(5):
            start = os.path.getsize(self.log) if os.path.exists(self.log) else 0
            self.proc = bt.spawn(cmd, stdin=subprocess.DEVNULL,
                                 stdout=open(self.log, "ab"),
                                 stderr=subprocess.STDOUT)
            try:
                if self.certs:
                    wait_for(self.accepts, 30, "etcd listening")
                    time.sleep(1)
                else:
                    wait_for(lambda: self.range_ok(), 30, "etcd answering")
                return
            except Failure:
                if (attempt == 4 or self.proc.poll() is None or
                        "address already in use" not in self.tail_since(start)):
                    raise
                time.sleep(1)

    def accepts(self):
        check(self.proc.poll() is None, "etcd exited:\n" + self.tail())
        try:
            socket.create_connection(("127.0.0.1", self.port), 1).close()
            return True
        except OSError:
            return False

    def range_ok(self):
        check(self.proc.poll() is None, "etcd exited:\n" + self.tail())
        try:
            self.post("/v3/kv/range", {"key": b64(b"x")})
            return True
        # A starting etcd may answer half a reply or one that is not JSON
        # (CI once saw the first request fail that way under AddressSanitizer
        # load): not answering yet, as much as a refused connection.
        except (OSError, http.client.HTTPException, ValueError):
            return False

    def post(self, path, body):
        req = urllib.request.Request(
            "http://127.0.0.1:%d%s" % (self.port, path),
            data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def kill9(self):
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def records(self, prefix=PREFIX):
        """{epoch: (change, raw record)} of every ring key under prefix."""
        start = (prefix + "/rings/").encode()
        end = (prefix + "/rings0").encode()  # '/' + 1
        got = self.post("/v3/kv/range", {"key": b64(start),
                                         "range_end": b64(end)})
        out = {}
        for kv in got.get("kvs", []):
            key = base64.b64decode(kv["key"]).decode()
            epoch, change = decode_record(base64.b64decode(kv["value"]))
            eq(int(key.rsplit("/", 1)[1]), epoch, "ring key %s" % key)
            out[epoch] = change
        return out

    def tail_since(self, offset):
        return bt.file_text(self.log, offset=offset)

    def tail(self, n=2000):
        return bt.file_text(self.log, last=n)


def b64(b):
    return base64.b64encode(b).decode()


def decode_full(raw):
    """A MembershipRecord (docs/FORMATS.md): (epoch, map text, change)."""
    check(raw[0] == 1, "record version %d" % raw[0])
    pos = 1

    def varint():
        nonlocal pos
        v, shift = 0, 0
        while True:
            b = raw[pos]
            pos += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v
    epoch = varint()
    n = varint()
    text = raw[pos:pos + n].decode()
    pos += n
    n = varint()
    change = raw[pos:pos + n].decode()
    pos += n
    eq(len(raw) - pos, 4, "checksum bytes after the record")
    return epoch, text, change


def decode_record(raw):
    """A MembershipRecord: (epoch, change)."""
    epoch, _, change = decode_full(raw)
    return epoch, change


def etcd_cluster(etcd, count=3, extra=(), tls_dir=None, prefix=PREFIX):
    args = ["--membership", "etcd", "--etcd-endpoints", etcd.endpoint(),
            "--etcd-prefix", prefix, "--ring-size", "8",
            "--ae-interval-ms", "1000"]
    if tls_dir:
        args += ["--etcd-tls-dir", tls_dir]
    return bt.Cluster(count, extra=args + list(extra))


def etcd_and_cluster():
    """etcd, and a three-node cluster on it, both started: (etcd, the
    cluster, its three members)."""
    etcd = Etcd()
    etcd.start()
    c = etcd_cluster(etcd)
    c.start()
    return etcd, c, [c.nodes[i] for i in (1, 2, 3)]


def spare(c, node_id):
    """A new node that fetched the map through node 1 (--join), not yet in
    the ring."""
    n = bt.Node(c, node_id)
    n.join = c.nodes[1].port
    c.nodes[node_id] = n
    n.start()
    return n


def command(node, *args, timeout=60):
    r = node.raw(timeout=timeout)
    try:
        return r.command(*args)
    finally:
        r.close()


def status(node):
    return bt.cluster_status(node) or {}


def join_args(n):
    return ("BIGSET.CLUSTER", "JOIN", str(n.id), "127.0.0.1:%d" % n.peer_port,
            "127.0.0.1:%d" % n.port)


def installed_rings(nodes):
    """{epoch: {ring}} from the nodes' logs ("installed ring epoch E nodes
    ..."): two rings for one epoch would show as two entries."""
    seen = {}
    pat = re.compile(r"installed ring epoch (\d+) nodes ([\d,]+)")
    for n in nodes:
        for epoch, ring in pat.findall(bt.file_text(n.log)):
            seen.setdefault(int(epoch), set()).add(ring)
    return seen


class Writer(threading.Thread):
    """SADDs of unique members through the given nodes until stopped;
    remembers what was acknowledged, and when."""

    def __init__(self, nodes, keys=8):
        super().__init__(daemon=True)
        self.nodes = nodes
        self.keys = keys
        self.acked = {}
        self.ack_times = []
        self.errors = 0
        self.stop_flag = threading.Event()

    def run(self):
        rng = random.Random(SEED)
        clients = {}
        i = 0
        while not self.stop_flag.is_set():
            node = self.nodes[i % len(self.nodes)]
            key = "w%d" % (i % self.keys)
            member = "m%d" % i
            i += 1
            try:
                cl = clients.get(node.id)
                if cl is None:
                    cl = node.client(socket_timeout=10)
                    clients[node.id] = cl
                cl.sadd(key, member)
                self.acked.setdefault(key, set()).add(member)
                self.ack_times.append(time.time())
            except Exception:  # noqa: BLE001 (a failed write may be lost)
                self.errors += 1
                clients.pop(node.id, None)
                time.sleep(0.05 + rng.random() * 0.05)

    def stop(self):
        self.stop_flag.set()
        self.join(timeout=30)

    # `with Writer(nodes) as writer:` writes while the block runs and stops
    # when it ends, also when it fails.
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def acks_between(self, t0, t1):
        return sum(1 for t in self.ack_times if t0 <= t <= t1)


def check_acked(writer, nodes):
    """Every write `writer` saw acknowledged is read on each of `nodes`."""
    for node in nodes:
        cl = node.client(socket_timeout=30)
        for key, members in writer.acked.items():
            got = set(x.decode() for x in cl.smembers(key))
            missing = members - got
            check(not missing, "node %d %s: %d acknowledged members missing "
                  "(e.g. %s)" % (node.id, key, len(missing),
                                 sorted(missing)[:3]))


def writes(node):
    """Whether `node` coordinates a write now."""
    try:
        return node.client(socket_timeout=10).sadd("__probe__", "x") >= 0
    except Exception:  # noqa: BLE001 (not yet)
        return False


def converged(nodes, epoch=None, moves=True):
    want = None
    for n in nodes:
        st = status(n)
        if not st:
            return False
        got = (st.get("ring_epoch"), st.get("ring_nodes"))
        if epoch is not None and got[0] != str(epoch):
            return False
        if want is None:
            want = got
        elif got != want:
            return False
        if moves and st.get("handoff.partitions_moving") != "0":
            return False
    return True


def explain(nodes):
    """Each node's view for a failure's message: its ring and the hand-off
    lines of BIGSET.CLUSTER STATUS (every partition still moving, and its
    state), so that a move that never settles says where it stopped."""
    out = []
    for n in nodes:
        text = bt.cluster_status_text(n)
        if text is None:
            out.append("node %d: down" % n.id)
            continue
        lines = [ln for ln in text.splitlines()
                 if ln.startswith(("ring_epoch", "ring_nodes", "handoff.",
                                   "moving:"))]
        try:
            info = n.client().info("all")
        except Exception as e:  # noqa: BLE001 (only for the message)
            info = {"info": str(e)}
        lines += ["%s=%s" % (k, v) for k, v in sorted(info.items())
                  if k.startswith(("node_membership_messages",
                                   "node_node_malformed", "node_membership_changes",
                                   "node_handoff_rings"))]
        out.append("node %d: %s" % (n.id, "; ".join(lines[:48])))
    return "\n".join(out)


def wait_converged(nodes, timeout, what, epoch=None, moves=True):
    """wait_for(converged(...)), failing with every node's view."""
    try:
        wait_for(lambda: converged(nodes, epoch, moves), timeout, what,
                 interval=0.5)
    except Failure as e:
        raise Failure("%s\n%s" % (e, explain(nodes))) from None


def test_concurrent_changes():
    rng = random.Random(SEED)
    etcd, c, members = etcd_and_cluster()
    spares = {i: spare(c, i) for i in (4, 5, 6)}
    everyone = members + list(spares.values())
    with Writer(members) as writer:
        for rnd in range(20):
            st = status(c.nodes[1])
            ring = set(int(x) for x in st["ring_nodes"].split(","))
            epoch = int(st["ring_epoch"])
            a, b = rng.sample(members, 2)

            def toggle(n):
                if n.id in ring:
                    return ("BIGSET.CLUSTER", "LEAVE", str(n.id))
                return join_args(n)
            conflicting = rnd % 2 == 0
            if conflicting:
                cmds = [toggle(spares[4]), toggle(spares[4])]
            else:
                cmds = [toggle(spares[5]), toggle(spares[6])]
            conns = [a.raw(timeout=60), b.raw(timeout=60)]
            replies = [None, None]
            barrier = threading.Barrier(2)

            def send(k):
                barrier.wait(timeout=10)
                replies[k] = conns[k].command(*cmds[k])
            threads = [threading.Thread(target=send, args=(k,))
                       for k in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            for r in conns:
                r.close()
            ok = [r for r in replies
                  if isinstance(r, bytes) and r.startswith(b"epoch ")]
            errs = [r for r in replies if isinstance(r, bt.Err)]
            epochs = sorted(int(r.split()[1].rstrip(b":")) for r in ok)
            if conflicting:
                check(len(ok) == 1 and len(errs) == 1,
                      "round %d, %s twice at once: %s" %
                      (rnd, cmds[0][1], replies))
                check("is in the ring" in errs[0] or
                      "is not in the ring" in errs[0],
                      "round %d: the loser's error: %s" % (rnd, errs[0]))
                eq(epochs, [epoch + 1], "round %d: epochs" % rnd)
            else:
                check(len(ok) == 2, "round %d, two independent changes at "
                      "once: %s" % (rnd, replies))
                eq(epochs, [epoch + 1, epoch + 2], "round %d: epochs" % rnd)
            final = epochs[-1]
            wait_for(lambda: converged(everyone, final, moves=False), 60,
                     "round %d: every node on epoch %d" % (rnd, final),
                     interval=0.2)
        wait_converged(everyone, 180, "every move settled")
    final = int(status(c.nodes[1])["ring_epoch"])
    records = etcd.records()
    eq(sorted(records), list(range(1, final + 1)),
       "etcd holds one ring per epoch")
    for epoch, rings in installed_rings(everyone).items():
        eq(len(rings), 1, "rings the nodes installed for epoch %d" % epoch)
    check(writer.acked, "no write was acknowledged")
    check_acked(writer, members)
    print("  %d epochs, %d writes acknowledged, %d failed" %
          (final, sum(len(v) for v in writer.acked.values()), writer.errors))


def test_etcd_outage():
    etcd, c, members = etcd_and_cluster()
    n4 = spare(c, 4)
    with Writer(members) as writer:
        time.sleep(1)
        etcd.kill9()
        t0 = time.time()
        time.sleep(3)
        acks = writer.acks_between(t0, time.time())
        check(acks > 50, "only %d writes acknowledged in the 3 s after etcd "
              "went down" % acks)
        # A change fails clearly, within its wait.
        start = time.time()
        reply = command(c.nodes[2], *join_args(n4))
        check(isinstance(reply, bt.Err) and
              "etcd cannot be reached" in reply and
              "the change was not made" in reply,
              "JOIN while etcd is down: %s" % bt.short(reply))
        check(time.time() - start < 20, "the refused JOIN took %.1fs" %
              (time.time() - start))
        eq(status(c.nodes[1]).get("ring_epoch"), "1", "ring while etcd down")
        # A node restarted meanwhile serves with its saved ring.
        c.nodes[3].kill9()
        c.nodes[3].start()
        wait_for(lambda: writes(c.nodes[3]), 30,
                 "node 3 coordinating after its restart")
        eq(status(c.nodes[3]).get("ring_epoch"), "1",
           "restarted node's ring")
        # etcd back (its data kept): the change goes through.
        etcd.start()
        reply = command(c.nodes[2], *join_args(n4))
        check(isinstance(reply, bytes) and reply.startswith(b"epoch 2:"),
              "JOIN once etcd is back: %s" % bt.short(reply))
        everyone = members + [n4]
        wait_converged(everyone, 120, "every node on epoch 2, moves settled",
                       epoch=2)
    check_acked(writer, members + [n4])
    eq(sorted(etcd.records()), [1, 2], "etcd's epochs")


def test_node_down():
    etcd, c, _ = etcd_and_cluster()
    n4 = spare(c, 4)
    c.nodes[1].client().sadd("before", *["b%d" % i for i in range(200)])
    c.nodes[3].kill9()
    reply = command(c.nodes[1], *join_args(n4))
    check(isinstance(reply, bytes) and reply.startswith(b"epoch 2:"),
          "JOIN 4: %s" % bt.short(reply))
    reply = command(c.nodes[2], "BIGSET.CLUSTER", "LEAVE", "1")
    check(isinstance(reply, bytes) and reply.startswith(b"epoch 3:"),
          "LEAVE 1: %s" % bt.short(reply))
    c.nodes[3].start()
    everyone = [c.nodes[i] for i in (1, 2, 3, 4)]
    wait_converged(everyone, 120, "every node on epoch 3, moves settled",
                   epoch=3)
    eq(status(c.nodes[3]).get("ring_nodes"), "2,3,4", "node 3's ring")
    # Node 3 restarted a moment ago: its peers may still wait out their
    # reconnect back-off to it, and a count that asked it answers TRYAGAIN
    # meanwhile (seen once in CI). The data must be whole within a bound.
    for n in (c.nodes[2], c.nodes[3], n4):
        deadline = time.time() + 20
        while True:
            try:
                got = n.client().scard("before")
                break
            except redis.exceptions.ResponseError as e:
                if "TRYAGAIN" not in str(e) or time.time() > deadline:
                    raise
                time.sleep(0.2)
        eq(got, 200, "node %d SCARD" % n.id)


def make_etcd_certs(d):
    """A CA, etcd's certificate (for 127.0.0.1, server and client use: its
    gateway dials etcd with it) and bigsetd's client certificate."""
    os.makedirs(d, exist_ok=True)

    def run(*args):
        subprocess.run(["openssl"] + list(args), check=True, cwd=d,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=60)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=test-etcd-ca")
    for name, cn in (("server", "127.0.0.1"), ("client", "bigsetd")):
        ext = os.path.join(d, name + ".ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                    "extendedKeyUsage=serverAuth,clientAuth\n")
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key",
            "-out", name + ".csr", "-subj", "/CN=" + cn)
        run("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey",
            "ca.key", "-CAcreateserial", "-days", "2", "-out", name + ".pem",
            "-extfile", ext)


def test_tls():
    d = bt.tmpdir()
    certs = os.path.join(d, "etcd-certs")
    make_etcd_certs(certs)
    # bigsetd's --etcd-tls-dir: ca.pem, client.pem, client.key.
    mine = os.path.join(d, "bigsetd-etcd")
    os.makedirs(mine)
    for f in ("ca.pem", "client.pem", "client.key"):
        with open(os.path.join(certs, f), "rb") as src, \
                open(os.path.join(mine, f), "wb") as dst:
            dst.write(src.read())
    etcd = Etcd(certs=certs)
    etcd.start()
    c = etcd_cluster(etcd, tls_dir=mine)
    c.start()
    n4 = spare(c, 4)
    reply = command(c.nodes[1], *join_args(n4))
    check(isinstance(reply, bytes) and reply.startswith(b"epoch 2:"),
          "JOIN over TLS: %s\n%s" % (bt.short(reply), c.nodes[1].tail_log()))
    everyone = [c.nodes[i] for i in (1, 2, 3)] + [n4]
    wait_for(lambda: converged(everyone, 2, moves=False), 60,
             "every node on epoch 2")
    # Without a client certificate etcd refuses: the change fails clearly.
    bare = os.path.join(d, "ca-only")
    os.makedirs(bare)
    with open(os.path.join(certs, "ca.pem"), "rb") as src, \
            open(os.path.join(bare, "ca.pem"), "wb") as dst:
        dst.write(src.read())
    n5 = bt.Node(c, 5)
    n5.join = c.nodes[1].port
    n5.extra = [x if x != mine else bare for x in n5.extra]
    c.nodes[5] = n5
    n5.start()
    reply = command(n5, *join_args(n5), timeout=60)
    check(isinstance(reply, bt.Err) and "etcd" in reply,
          "JOIN through a node without a client certificate: %s" %
          bt.short(reply))
    eq(status(c.nodes[1]).get("ring_epoch"), "2", "ring unchanged")


def test_refusals():
    etcd = Etcd()
    etcd.start()
    d = bt.tmpdir()
    base = [bt.BIGSETD, "--id", "1", "--data", os.path.join(d, "n"),
            "--node", "1=127.0.0.1:%d" % bt.free_port(), "--plaintext-peers",
            "--n", "1", "--w", "1", "--r", "1",
            "--listen", "127.0.0.1:%d" % bt.free_port()]
    for extra, want in (
            (["--membership", "etcd"], "--etcd-endpoints"),
            (["--membership", "zk"], "builtin or etcd"),
            (["--etcd-endpoints", "127.0.0.1:1"], "--membership etcd"),
            (["--membership", "etcd", "--etcd-endpoints", "nohostport"],
             "HOST:PORT"),
            (["--membership", "etcd", "--etcd-endpoints", "127.0.0.1:1",
              "--etcd-prefix", "noslash"], "--etcd-prefix"),
            (["--membership", "etcd", "--etcd-endpoints", "127.0.0.1:1",
              "--etcd-tls-dir", os.path.join(d, "missing")], "cannot read")):
        p = subprocess.run(base + extra, capture_output=True, timeout=30)
        eq(p.returncode, 2, "exit code of %s" % extra)
        check(want in p.stderr.decode(), "%s: stderr %r lacks %r" %
              (extra, p.stderr.decode(), want))
    c = etcd_cluster(etcd)
    c.start()
    text = command(c.nodes[1], "BIGSET.CLUSTER", "GET")
    check(isinstance(text, bytes), "GET: %s" % bt.short(text))
    reply = command(c.nodes[1], "BIGSET.CLUSTER", "INSTALL", text)
    check(isinstance(reply, bt.Err) and "etcd" in reply,
          "INSTALL with etcd membership: %s" % bt.short(reply))
    reply = command(c.nodes[1], "BIGSET.CLUSTER", "LEAVE", "9")
    check(isinstance(reply, bt.Err) and "not in the ring" in reply,
          "LEAVE 9: %s" % bt.short(reply))
    eq(status(c.nodes[1]).get("membership"), "etcd", "STATUS membership")
    eq(sorted(etcd.records()), [1], "etcd's epochs")


TESTS = {
    "concurrent_changes": test_concurrent_changes,
    "etcd_outage": test_etcd_outage,
    "node_down": test_node_down,
    "tls": test_tls,
    "refusals": test_refusals,
}


def run(tests, seed):
    """Runs the test named on the command line (or "all") of `tests` with
    bigsetd_test's runner: PASS/FAIL lines, node logs of a failed test,
    everything stopped by pid after each test."""
    bt.TESTS.clear()
    bt.TESTS.update(tests)
    bt.SEED = seed
    return bt.main()


if __name__ == "__main__":
    sys.exit(run(TESTS, SEED))
