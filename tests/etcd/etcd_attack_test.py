#!/usr/bin/env python3
"""Fault tests of bigsetd's membership in etcd (--membership etcd): real etcd
and bigsetd processes on 127.0.0.1, killed, frozen, wiped and fed garbage.

Tests:
  coordinator_kill9   the node a change goes through is killed -9 at a
                      (seeded) random moment of the change, 8 times: every
                      node converges on etcd's latest ring, etcd holds one
                      ring per epoch, no epoch was installed with two rings,
                      a reply "epoch N: ring R" matches what was installed,
                      acknowledged writes survive.
  etcd_sigstop        etcd frozen (SIGSTOP, connections open): a change
                      fails clearly within a bound, writes go on, a node
                      stops on SIGTERM within 10 s; etcd resumed: the change
                      goes through and every node converges.
  shutdown_during_change  etcd frozen: an idle node, and a node with a
                      change waiting for etcd, stop within 5 s of SIGTERM.
  frozen_member       a 3-member etcd, the member one node watches and asks
                      first is frozen: the other two keep a quorum, a change
                      through another node is recorded; the node must install
                      it from its watch, and a change through it must work.
  watch_half_open     the watch's connection silently dead (a proxy that
                      swallows both ways of established connections, new
                      ones pass, as after a NAT/firewall lost its state or
                      etcd's host vanished): the node must still learn a
                      change made meanwhile.
  late_txn            a change's transaction reaches etcd after its 5 s
                      deadline (a proxy holds it), then etcd cannot be
                      reached for a while: the reply must not say "the
                      change was not made" when etcd recorded it.
  etcd_wiped          etcd restarted on an empty data directory at epoch 3:
                      the nodes record their ring again (epoch 3, not older),
                      the next change is epoch 4 everywhere.
  wiped_stale_node    etcd wiped, the cluster restarted, a node that missed
                      epoch 2 comes back first and a change goes through it:
                      no epoch may be installed with two rings.
  garbage_ring        an operator puts non-record bytes at a ring key above
                      the latest: no node crashes, the bad key is logged, a
                      change fails naming it, a node restarted meanwhile
                      serves; the key deleted, changes work again.
  garbage_epoch       an operator puts a bad value at "<prefix>/epoch": no
                      node crashes, and a change fails naming the problem
                      (not "lost races to other changes" that never were).
  change_storm        5 clients issue JOIN/LEAVE to 3 nodes for 30 s: every
                      reply is "epoch N: ..." or a clear error, etcd holds
                      one ring per epoch, no epoch installed with two rings,
                      every reply's ring is what the nodes installed, every
                      node ends on one ring.
  restart_loop        a node killed -9 and restarted 6 times while changes go
                      through the others: it ends on etcd's latest ring.
  etcd_down_at_start  a new cluster started while etcd is down: it serves,
                      a change fails clearly; etcd up: epoch 1 recorded, a
                      change goes through.
  compaction          changes made while a node is frozen (SIGSTOP) or down,
                      old ring keys deleted (as docs/FORMATS.md allows) and
                      etcd compacted: the node catches up.
  two_prefixes        two clusters on one etcd with different prefixes: each
                      one's changes stay its own.
  same_prefix         two clusters on one etcd with the same prefix by
                      mistake: a change through cluster B must not change
                      cluster A's ring (nor B adopt A's nodes' addresses).
  tls_wrong_ca        bigsetd trusts another CA than etcd's: a change fails
                      within a bound naming TLS, the node serves, the watch
                      logs why.

Usage: /usr/bin/python3 etcd_attack_test.py BIGSETD MAKE_CERTS TEST
       (TEST "all" runs every test)

Every test ends by itself within 120 s (an alarm), binds 127.0.0.1 only,
uses fixed seeds, and stops what it started by pid, also when it fails.
"""

import base64
import contextlib
import functools
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bigsetd"))
sys.path.insert(0, HERE)
import bigsetd_test as bt  # noqa: E402 (the cluster harness)
from bigsetd_test import Failure, check, eq, wait_for  # noqa: E402
import etcd_membership_test as em  # noqa: E402 (Etcd, helpers)
from etcd_membership_test import (Etcd, command, status, join_args,  # noqa
                                  spare, converged, installed_rings,
                                  Writer, check_acked, PREFIX, etcd_cluster,
                                  etcd_and_cluster)

SEED = 20261201
ETCDCTL = "/usr/bin/etcdctl"
TEST_BOUND = 115  # seconds, before cleanup


# ---- Helpers.

def bounded(fn):
    """Fails the test (Failure in the main thread) after TEST_BOUND s."""
    @functools.wraps(fn)
    def run():
        def expired(signum, frame):
            raise Failure("test still running after %d s" % TEST_BOUND)
        old = signal.signal(signal.SIGALRM, expired)
        signal.alarm(TEST_BOUND)
        try:
            return fn()
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
    return run


def etcdctl(endpoint, *args, check_rc=True):
    env = dict(os.environ, ETCDCTL_API="3")
    p = subprocess.run([ETCDCTL, "--endpoints", "http://" + endpoint,
                        "--command-timeout", "10s"] + list(args),
                       capture_output=True, timeout=30, env=env)
    if check_rc:
        check(p.returncode == 0, "etcdctl %s: %s" %
              (" ".join(args), p.stderr.decode()[-500:]))
    return p.stdout


def b64(b):
    return base64.b64encode(b).decode()


def ring_key(prefix, epoch):
    return "%s/rings/%020d" % (prefix, epoch)


decode_full = em.decode_full  # (epoch, map text, change)


def raw_records(etcd, prefix=PREFIX):
    """{key: raw value} of every key under prefix/rings/."""
    start = (prefix + "/rings/").encode()
    end = (prefix + "/rings0").encode()
    got = etcd.post("/v3/kv/range", {"key": b64(start),
                                     "range_end": b64(end)})
    return {base64.b64decode(kv["key"]).decode():
            base64.b64decode(kv["value"]) for kv in got.get("kvs", [])}


def latest_epoch(etcd, prefix=PREFIX):
    recs = etcd.records(prefix)
    return max(recs) if recs else 0


def revision(etcd):
    got = etcd.post("/v3/kv/range", {"key": b64(b"x")})
    return int(got["header"]["revision"])


def is_ok(reply):
    return isinstance(reply, bytes) and reply.startswith(b"epoch ")


def reply_epoch_ring(reply):
    m = re.match(rb"epoch (\d+): ring ([\d,]+)", reply)
    check(m is not None, "reply %s" % bt.short(reply))
    return int(m.group(1)), m.group(2).decode()


def starts(reply, prefix):
    return isinstance(reply, bytes) and reply.startswith(prefix)


def ring_of(n):
    st = status(n)
    return st.get("ring_epoch"), st.get("ring_nodes")


def log_text(n):
    """Node n's whole log."""
    return bt.file_text(n.log)


def one_ring_per_epoch(nodes, what):
    rings = installed_rings(nodes)
    for epoch, rs in sorted(rings.items()):
        check(len(rs) == 1, "%s: epoch %d was installed with %d rings: %s" %
              (what, epoch, len(rs), sorted(rs)))
    return {e: next(iter(rs)) for e, rs in rings.items()}


def contiguous_epochs(etcd, what, prefix=PREFIX, first=1):
    recs = etcd.records(prefix)
    eq(sorted(recs), list(range(first, max(recs) + 1)),
       "%s: etcd's epochs" % what)
    return recs


def all_on_latest(etcd, nodes):
    """Every node runs etcd's latest epoch, all on one ring."""
    want = latest_epoch(etcd)
    return converged(nodes, want, moves=False)


def no_crash(nodes):
    for n in nodes:
        check(n.alive(), "node %d exited (%s)\n%s" %
              (n.id, n.proc.returncode, n.tail_log()))


def with_spares(c, members, ids):
    """Spare nodes `ids` of cluster c (see spare): (them, the members and
    them)."""
    spares = [spare(c, i) for i in ids]
    return spares, members + spares


def set_endpoints(node, endpoints):
    i = node.extra.index("--etcd-endpoints")
    node.extra[i + 1] = endpoints


@contextlib.contextmanager
def cluster_through(proxy_class, node_id):
    """etcd, a proxy_class to it, and a three-node cluster on etcd whose
    node `node_id` reaches etcd through the proxy, started, epoch 1
    recorded, and a spare node 4: (etcd, the proxy, the cluster, its three
    members, node 4). The proxy is stopped when the block ends."""
    etcd = Etcd()
    etcd.start()
    proxy = proxy_class(etcd.port)
    try:
        c = etcd_cluster(etcd)
        set_endpoints(c.nodes[node_id], proxy.endpoint())
        c.start()
        n4 = spare(c, 4)
        members = [c.nodes[i] for i in (1, 2, 3)]
        wait_for(lambda: etcd.records().keys() == {1}, 30,
                 "epoch 1 recorded")
        time.sleep(1)  # node_id's watch established through the proxy
        yield etcd, proxy, c, members, n4
    finally:
        proxy.stop()


class Toggler:
    """Picks JOIN or LEAVE of spare nodes against the ring a node shows."""

    def __init__(self, spares, rng):
        self.spares = spares
        self.rng = rng

    def next(self, through):
        st = status(through)
        ring = set(int(x) for x in st.get("ring_nodes", "").split(",") if x)
        n = self.rng.choice(self.spares)
        if n.id in ring:
            return ("BIGSET.CLUSTER", "LEAVE", str(n.id))
        return join_args(n)


class EtcdMember(Etcd):
    """One member of a multi-member etcd cluster."""

    def __init__(self, name):
        super().__init__()
        self.name = name
        self.initial = None

    def start(self):
        client = "http://127.0.0.1:%d" % self.port
        peer = "http://127.0.0.1:%d" % self.peer_port
        cmd = [em.ETCD, "--name", self.name, "--data-dir",
               os.path.join(self.dir, "data"),
               "--listen-client-urls", client,
               "--advertise-client-urls", client,
               "--listen-peer-urls", peer,
               "--initial-advertise-peer-urls", peer,
               "--initial-cluster", self.initial,
               "--initial-cluster-state", "new",
               "--initial-cluster-token", "attack"]
        self.proc = bt.spawn(cmd, stdin=subprocess.DEVNULL,
                             stdout=open(self.log, "ab"),
                             stderr=subprocess.STDOUT)


def etcd_members(count=3):
    ms = [EtcdMember("m%d" % i) for i in range(count)]
    initial = ",".join("%s=http://127.0.0.1:%d" % (m.name, m.peer_port)
                       for m in ms)
    for m in ms:
        m.initial = initial
        m.start()
    for m in ms:
        wait_for(m.range_ok, 60, "etcd member %s answering" % m.name)
    return ms


class Proxy:
    """A TCP proxy on 127.0.0.1 to `target_port`. freeze() makes every
    connection open now a black hole (both ways swallowed, sockets kept
    open); connections made later pass."""

    def __init__(self, target_port):
        self.target = target_port
        self.port = bt.free_port()
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", self.port))
        self.lsock.listen(64)
        self.lock = threading.Lock()
        self.conns = []  # [client, upstream, frozen]
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def endpoint(self):
        return "127.0.0.1:%d" % self.port

    def _accept(self):
        while not self.stopping:
            r, _, _ = select.select([self.lsock], [], [], 0.2)
            if not r:
                continue
            try:
                a, _ = self.lsock.accept()
            except OSError:
                continue
            self._take(a)

    def _take(self, a):
        """Relays the accepted connection `a` to the target."""
        try:
            b = socket.create_connection(("127.0.0.1", self.target), 5)
        except OSError:
            return
        entry = [a, b, False]
        with self.lock:
            self.conns.append(entry)
        threading.Thread(target=self._pump, args=(entry,),
                         daemon=True).start()

    def _pump(self, entry):
        a, b = entry[0], entry[1]
        try:
            while not self.stopping:
                r, _, _ = select.select([a, b], [], [], 0.2)
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        return
                    if entry[2]:
                        continue  # Frozen: swallowed.
                    (b if s is a else a).sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def freeze(self):
        with self.lock:
            for e in self.conns:
                e[2] = True
            return len(self.conns)

    def stop(self):
        self.stopping = True
        try:
            self.lsock.close()
        except OSError:
            pass


class ScriptedProxy(Proxy):
    """A Proxy whose new connections, once script() is called, each take
    the next action of the script: "pass", ("hold", seconds) (the request
    is read whole, held, then sent; the answer is relayed to a client that
    may have given up), or "refuse" (closed at once, as when etcd cannot
    be reached); after the script, "refuse"."""

    def __init__(self, target_port):
        self.actions = None
        super().__init__(target_port)

    def script(self, actions):
        with self.lock:
            self.actions = list(actions)

    def _take(self, a):
        with self.lock:
            if self.actions is None:
                action = "pass"
            elif self.actions:
                action = self.actions.pop(0)
            else:
                action = "refuse"
        threading.Thread(target=self._serve, args=(a, action),
                         daemon=True).start()

    def _serve(self, a, action):
        if action == "refuse":
            a.close()
            return
        try:
            b = socket.create_connection(("127.0.0.1", self.target), 5)
        except OSError:
            a.close()
            return
        if action == "pass":
            entry = [a, b, False]
            with self.lock:
                self.conns.append(entry)
            self._pump(entry)
            return
        hold = action[1]
        try:
            a.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = a.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            m = re.search(rb"Content-Length: (\d+)", head)
            want = int(m.group(1)) if m else 0
            while len(body) < want:
                chunk = a.recv(65536)
                if not chunk:
                    break
                body += chunk
            time.sleep(hold)
            b.sendall(head + b"\r\n\r\n" + body)
            b.settimeout(10)
            while True:
                chunk = b.recv(65536)
                if not chunk:
                    break
                try:
                    a.sendall(chunk)
                except OSError:
                    pass  # The client gave up: etcd answered all the same.
        except OSError:
            pass
        finally:
            a.close()
            b.close()


# ---- Tests.

@bounded
def test_coordinator_kill9():
    rng = random.Random(SEED)
    etcd, c, members = etcd_and_cluster()
    spares, everyone = with_spares(c, members, (4, 5))
    coord = c.nodes[3]
    toggler = Toggler(spares, rng)
    answered = []  # (epoch, ring) of replies received before the kill
    with Writer([c.nodes[1], c.nodes[2]]) as writer:
        for rnd in range(12):
            cmd = toggler.next(c.nodes[1])
            box = {}

            def send():
                try:
                    box["reply"] = command(coord, *cmd, timeout=30)
                except (OSError, EOFError) as e:
                    box["reply"] = e
            t = threading.Thread(target=send, daemon=True)
            t.start()
            time.sleep(rng.uniform(0.0, 0.02))
            coord.kill9()
            t.join(timeout=30)
            reply = box.get("reply")
            if is_ok(reply):
                answered.append(reply_epoch_ring(reply))
            coord.start()
            wait_for(lambda: all_on_latest(etcd, everyone), 30,
                     "round %d: every node on etcd's latest epoch %d" %
                     (rnd, latest_epoch(etcd)), interval=0.2)
        # Every node on the latest ring; the moves settled on every node
        # that was in a ring. A spare no change ever took in is in nobody's
        # map: the others have no address to answer its gossip with, so its
        # view of who serves what is the one it started with (its STATUS
        # shows the moves of the first ring it knew until it joins).
        em.wait_converged(everyone, 60, "every node on the latest ring",
                          moves=False)
        ever = {int(x) for rs in installed_rings(everyone).values()
                for r in rs for x in r.split(",")}
        em.wait_converged([n for n in everyone if n.id in ever], 60,
                          "moves settled")
    contiguous_epochs(etcd, "after 12 kills")
    rings = one_ring_per_epoch(everyone, "after 12 kills")
    for epoch, ring in answered:
        eq(rings.get(epoch), ring, "the ring a reply named for epoch %d" %
           epoch)
    check(writer.acked, "no write was acknowledged")
    check_acked(writer, members)
    print("  %d epochs, %d replies before the kill" %
          (latest_epoch(etcd), len(answered)))


@bounded
def test_etcd_sigstop():
    etcd, c, members = etcd_and_cluster()
    n4 = spare(c, 4)
    with Writer(members) as writer:
        os.kill(etcd.proc.pid, signal.SIGSTOP)
        t0 = time.time()
        reply = command(c.nodes[2], *join_args(n4), timeout=60)
        took = time.time() - t0
        check(isinstance(reply, bt.Err) and "etcd" in reply,
              "JOIN while etcd is frozen: %s" % bt.short(reply))
        check(took < 25, "the JOIN with a frozen etcd took %.1f s" % took)
        acks = writer.acks_between(t0, time.time())
        check(acks > 20, "only %d writes acknowledged while etcd was "
              "frozen" % acks)
        c.nodes[3].start()
        os.kill(etcd.proc.pid, signal.SIGCONT)
        # The frozen JOIN may have been applied late; then it says so.
        reply = command(c.nodes[2], *join_args(n4), timeout=60)
        check(is_ok(reply) or (isinstance(reply, bt.Err) and
                               "is in the ring" in reply),
              "JOIN once etcd resumed: %s" % bt.short(reply))
        everyone = members + [n4]
        wait_for(lambda: converged(everyone, 2, moves=False), 40,
                 "every node on epoch 2")
        eq(ring_of(c.nodes[1])[1], "1,2,3,4", "the ring")
    check_acked(writer, members)
    contiguous_epochs(etcd, "after the freeze")
    one_ring_per_epoch(members + [n4], "after the freeze")


@bounded
def test_shutdown_during_change():
    etcd, c, _ = etcd_and_cluster()
    n4 = spare(c, 4)
    os.kill(etcd.proc.pid, signal.SIGSTOP)
    # Idle: a node stops promptly although etcd does not answer.
    t1 = time.time()
    rc = c.nodes[2].stop(timeout=30)
    took = time.time() - t1
    eq(rc, 0, "node 2's exit status on SIGTERM with etcd frozen")
    check(took < 5, "idle node 2 took %.1f s to stop with etcd frozen" % took)
    # A change through node 3 waits for etcd: SIGTERM must not wait for it.
    box = {}

    def pending():
        try:
            box["reply"] = command(c.nodes[3], *join_args(n4), timeout=60)
        except (OSError, EOFError) as e:
            box["reply"] = e
    t = threading.Thread(target=pending, daemon=True)
    t.start()
    time.sleep(0.5)
    t1 = time.time()
    rc = c.nodes[3].stop(timeout=30)
    took = time.time() - t1
    t.join(timeout=30)
    print("  node 3 stopped in %.1f s; the pending JOIN got %s" %
          (took, bt.short(box.get("reply"))))
    eq(rc, 0, "node 3's exit status")
    check(took < 5, "node 3 took %.1f s to stop (SIGTERM 0.5 s into a "
          "change waiting for a frozen etcd; the JOIN's client got %s)" %
          (took, bt.short(box.get("reply"))))
    os.kill(etcd.proc.pid, signal.SIGCONT)


@bounded
def test_frozen_member():
    ms = etcd_members(3)
    a, b, frozen = ms
    order_ok = ",".join(m.endpoint() for m in (a, b, frozen))
    order_3 = ",".join(m.endpoint() for m in (frozen, a, b))
    c = etcd_cluster(a)
    for i in (1, 2):
        set_endpoints(c.nodes[i], order_ok)
    set_endpoints(c.nodes[3], order_3)
    c.start()
    n4 = spare(c, 4)
    set_endpoints(n4, order_ok)  # (already started: only for a restart)
    wait_for(lambda: a.records().keys() == {1}, 30, "epoch 1 recorded")
    members = [c.nodes[i] for i in (1, 2, 3)]
    os.kill(frozen.proc.pid, signal.SIGSTOP)
    problems = []
    # The two others keep a quorum (a new leader within a few seconds).
    reply = None
    for _ in range(10):
        reply = command(c.nodes[1], *join_args(n4), timeout=60)
        if is_ok(reply):
            break
        time.sleep(1)
    check(is_ok(reply), "JOIN through node 1 with a member of 3 frozen: %s"
          % bt.short(reply))
    try:
        wait_for(lambda: ring_of(c.nodes[3])[0] == "2", 30,
                 "node 3 (whose watch is on the frozen member) on epoch 2")
    except Failure as e:
        problems.append("%s: it stays on %s" % (e, ring_of(c.nodes[3])))
    t0 = time.time()
    reply = command(c.nodes[3], "BIGSET.CLUSTER", "LEAVE", "4", timeout=60)
    took = time.time() - t0
    if not is_ok(reply):
        problems.append("LEAVE 4 through node 3 (its first endpoint frozen, "
                        "two of three answer) after %.1f s: %s" %
                        (took, bt.short(reply)))
    check(not problems, "; ".join(problems))
    wait_for(lambda: converged(members + [n4], 3, moves=False), 30,
             "every node on epoch 3")


@bounded
def test_watch_half_open():
    with cluster_through(Proxy, 3) as (etcd, proxy, c, members, n4):
        frozen = proxy.freeze()
        check(frozen >= 1, "no connection through the proxy to freeze")
        reply = command(c.nodes[1], *join_args(n4))
        check(is_ok(reply), "JOIN 4: %s" % bt.short(reply))
        wait_for(lambda: converged([c.nodes[1], c.nodes[2], n4], 2,
                                   moves=False), 30, "nodes 1, 2, 4 on 2")
        try:
            wait_for(lambda: ring_of(c.nodes[3])[0] == "2", 60,
                     "node 3 (its watch's connection dead) on epoch 2")
        except Failure as e:
            raise Failure("%s: it stays on %s, its log says nothing of "
                          "etcd after the freeze: %s" %
                          (e, ring_of(c.nodes[3]),
                           [ln for ln in log_text(c.nodes[3]).splitlines()
                            if "etcd" in ln][-2:]))
        check(converged(members + [n4], 2, moves=False), "converged")


@bounded
def test_late_txn():
    # The proxy passes all until script(): node 1's watch is set up.
    with cluster_through(ScriptedProxy, 1) as (etcd, proxy, c, members, n4):
        # The change's read passes, its transaction reaches etcd 6 s late
        # (after the 5 s deadline), the read after the timeout passes, then
        # etcd cannot be reached from node 1 for a while.
        proxy.script(["pass", ("hold", 6.0), "pass"])
        t0 = time.time()
        reply = command(c.nodes[1], *join_args(n4), timeout=60)
        took = time.time() - t0
        time.sleep(2)
        recs = etcd.records()
        print("  JOIN 4 (%.1f s): %s; etcd then holds %s" %
              (took, bt.short(reply), recs))
        made = any(ch.startswith("JOIN 4 ") for ch in recs.values())
        if made:
            check(is_ok(reply) or not re.search(
                "not made|not record", reply),
                  "node 1 answered %s, yet etcd recorded the change: %s "
                  "(node 1 runs %s)" % (bt.short(reply), recs,
                                        ring_of(c.nodes[1])))
        proxy.script([])
        proxy.actions = None  # everything passes again
        wait_for(lambda: all_on_latest(etcd, members + [n4]), 30,
                 "every node on etcd's latest epoch")


def wipe(etcd):
    etcd.kill9()
    shutil.rmtree(os.path.join(etcd.dir, "data"), ignore_errors=True)
    etcd.start()


@bounded
def test_etcd_wiped():
    etcd, c, members = etcd_and_cluster()
    (n4, n5), everyone = with_spares(c, members, (4, 5))
    for cmd in (join_args(n4), ("BIGSET.CLUSTER", "LEAVE", "4")):
        reply = command(c.nodes[1], *cmd)
        check(is_ok(reply), "%s: %s" % (cmd[1], bt.short(reply)))
    wait_for(lambda: converged(everyone, 3, moves=False), 30,
             "every node on epoch 3")
    wipe(etcd)
    # The nodes record their ring again: epoch 3, nothing older.
    wait_for(lambda: etcd.records().keys() == {3}, 30,
             "epoch 3 recorded again in the wiped etcd (it holds %s)" %
             sorted(etcd.records()))
    time.sleep(2)
    eq(sorted(etcd.records()), [3], "etcd's epochs after the wipe")
    for n in everyone:
        eq(ring_of(n), ("3", "1,2,3"), "node %d's ring after the wipe" %
           n.id)
    reply = command(c.nodes[2], *join_args(n5))
    check(starts(reply, b"epoch 4: ring 1,2,3,5"),
          "JOIN 5 after the wipe: %s" % bt.short(reply))
    wait_for(lambda: converged(everyone, 4, moves=False), 30,
             "every node on epoch 4")
    one_ring_per_epoch(everyone, "after the wipe")
    eq(sorted(etcd.records()), [3, 4], "etcd's epochs")


@bounded
def test_wiped_stale_node():
    etcd, c, members = etcd_and_cluster()
    n4 = spare(c, 4)
    c.nodes[3].kill9()
    reply = command(c.nodes[1], *join_args(n4))
    check(starts(reply, b"epoch 2: ring 1,2,3,4"),
          "JOIN 4: %s" % bt.short(reply))
    wait_for(lambda: converged([c.nodes[1], c.nodes[2], n4], 2, moves=False),
             30, "nodes 1, 2, 4 on epoch 2")
    # etcd lost (restored on an empty data directory), the whole cluster
    # restarted; node 3 (which missed epoch 2) is back first.
    for n in (c.nodes[1], c.nodes[2], n4):
        n.kill9()
    wipe(etcd)
    c.nodes[3].start()
    # Alone it is no majority of its ring: it must not record the ring it
    # alone remembers, and a change through it must not make one either.
    time.sleep(3)
    eq(etcd.records(), {}, "etcd's rings while only node 3 runs")
    # Never started: only its addresses are used (FORCE: no handshake
    # checks, the etcd side is what is tested).
    n5 = bt.Node(c, 5)
    reply = command(c.nodes[3], *join_args(n5), "FORCE")
    check(isinstance(reply, bt.Err), "JOIN 5 through node 3 alone, with etcd "
          "empty: %s" % bt.short(reply))
    eq(etcd.records(), {}, "etcd's rings after the refused JOIN")
    for n in (c.nodes[1], c.nodes[2], n4):
        n.start()
    # The newest ring a majority knows is recorded: epoch 2.
    wait_for(lambda: 2 in etcd.records(), 30, "epoch 2 recorded again")
    eq(sorted(etcd.records()), [2], "etcd's epochs after the restart")
    wait_for(lambda: converged(members + [n4], 2, moves=False), 30,
             "every node on epoch 2")
    reply = command(c.nodes[3], *join_args(n5), "FORCE")
    check(starts(reply, b"epoch 3: ring 1,2,3,4,5"),
          "JOIN 5 through node 3 afterwards: %s" % bt.short(reply))
    everyone = members + [n4]
    time.sleep(5)
    no_crash(everyone)
    rings = installed_rings(everyone)
    per_node = {n.id: ring_of(n) for n in everyone}
    check(all(len(rs) == 1 for rs in rings.values()),
          "epochs installed with two rings: %s; the nodes run %s; etcd "
          "holds %s" % ({e: sorted(rs) for e, rs in rings.items()
                         if len(rs) > 1}, per_node, etcd.records()))
    wait_for(lambda: converged(everyone, moves=False), 30,
             "every node on one ring")


@bounded
def test_garbage_ring():
    etcd, c, members = etcd_and_cluster()
    (n4, n5), everyone = with_spares(c, members, (4, 5))
    reply = command(c.nodes[1], *join_args(n4))
    check(is_ok(reply), "JOIN 4: %s" % bt.short(reply))
    wait_for(lambda: converged(everyone, 2, moves=False), 30, "epoch 2")
    bad_key = ring_key(PREFIX, 99)
    etcdctl(etcd.endpoint(), "put", bad_key, "not a record \x01\x02")
    etcdctl(etcd.endpoint(), "put", ring_key(PREFIX, 1), "overwritten")
    wait_for(lambda: all("does not decode" in log_text(n)
                         for n in everyone), 20,
             "every node logs the undecodable ring key")
    time.sleep(1)
    no_crash(everyone)
    for n in everyone:
        eq(ring_of(n), ("2", "1,2,3,4"), "node %d's ring" % n.id)
    t0 = time.time()
    reply = command(c.nodes[2], *join_args(n5), timeout=60)
    print("  JOIN 5 with a garbage ring key: %s" % bt.short(reply))
    check(isinstance(reply, bt.Err) and "corrupt" in reply and
          time.time() - t0 < 25,
          "JOIN 5 with a garbage latest ring key (%.1f s): %s" %
          (time.time() - t0, bt.short(reply)))
    # A node restarted meanwhile serves from its saved ring.
    c.nodes[3].kill9()
    c.nodes[3].start()
    wait_for(lambda: ring_of(c.nodes[3]) == ("2", "1,2,3,4"), 20,
             "node 3 back on epoch 2")
    etcdctl(etcd.endpoint(), "del", bad_key)
    reply = command(c.nodes[2], *join_args(n5), timeout=60)
    check(starts(reply, b"epoch 3: ring 1,2,3,4,5"),
          "JOIN 5 once the bad key is gone: %s" % bt.short(reply))
    wait_for(lambda: converged(everyone, 3, moves=False), 30,
             "every node on epoch 3 (node 3's watch recovered)")
    no_crash(everyone)
    one_ring_per_epoch(everyone, "garbage")


@bounded
def test_garbage_epoch():
    etcd, c, members = etcd_and_cluster()
    n4 = spare(c, 4)
    wait_for(lambda: etcd.records().keys() == {1}, 30, "epoch 1 recorded")
    etcdctl(etcd.endpoint(), "put", PREFIX + "/epoch", "garbage")
    t0 = time.time()
    reply = command(c.nodes[1], *join_args(n4), timeout=60)
    took = time.time() - t0
    no_crash(members + [n4])
    if is_ok(reply):
        wait_for(lambda: converged(members + [n4], 2, moves=False), 30,
                 "epoch 2 everywhere")
        return
    races = log_text(c.nodes[1]).count("trying again on top of it")
    check(isinstance(reply, bt.Err) and "/epoch" in reply and
          "lost" not in reply,
          "JOIN with a bad %s/epoch (%.1f s, %d \"races\" logged, etcd's "
          "epochs %s, no other change made): %s" %
          (PREFIX, took, races, sorted(etcd.records()), bt.short(reply)))


@bounded
def test_change_storm():
    etcd, c, members = etcd_and_cluster()
    spares, everyone = with_spares(c, members, (4, 5, 6))
    replies = []
    lock = threading.Lock()
    stop_at = time.time() + 30
    bad = []

    def client(k):
        r = random.Random(SEED + k)
        while time.time() < stop_at:
            through = r.choice(members)
            n = r.choice(spares)
            cmd = (join_args(n) if r.random() < 0.5 else
                   ("BIGSET.CLUSTER", "LEAVE", str(n.id)))
            try:
                reply = command(through, *cmd, timeout=40)
            except Exception as e:  # noqa: BLE001
                with lock:
                    bad.append("%s through %d: %r" % (cmd[1:3], through.id,
                                                      e))
                return
            with lock:
                replies.append((cmd[1], reply))
    threads = [threading.Thread(target=client, args=(k,), daemon=True)
               for k in range(5)]
    with Writer(members) as writer:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        check(not bad, "clients failed: %s" % bad[:3])
        wait_for(lambda: all_on_latest(etcd, everyone), 30,
                 "every node on etcd's latest epoch %d" % latest_epoch(etcd))
    oks = [r for _, r in replies if is_ok(r)]
    errs = [r for _, r in replies if isinstance(r, bt.Err)]
    others = [r for _, r in replies if not is_ok(r) and
              not isinstance(r, bt.Err)]
    check(not others, "replies neither epoch nor error: %s" % others[:3])
    clear = ("is in the ring", "is not in the ring", "races in a row")
    unclear = [e for e in errs if not any(x in e for x in clear)]
    check(not unclear, "unexpected errors: %s" % [bt.short(e)
                                                   for e in unclear[:3]])
    check(len(oks) >= 20, "only %d changes in 30 s" % len(oks))
    recs = contiguous_epochs(etcd, "storm")
    rings = one_ring_per_epoch(everyone, "storm")
    epochs = [reply_epoch_ring(r)[0] for r in oks]
    eq(len(epochs), len(set(epochs)), "two replies named one epoch")
    for r in oks:
        e, ring = reply_epoch_ring(r)
        eq(rings.get(e), ring, "the ring epoch %d's reply named" % e)
    # Every recorded epoch above 1 is one acknowledged change (nothing
    # recorded that no one was told about), except changes cut short.
    check(len(recs) - 1 >= len(oks), "more replies than epochs")
    print("  %d changes, %d errors (%d lost-race), %d epochs" %
          (len(oks), len(errs), sum("races in a row" in e for e in errs),
           len(recs)))
    check_acked(writer, members)


@bounded
def test_restart_loop():
    rng = random.Random(SEED)
    etcd, c, members = etcd_and_cluster()
    spares, everyone = with_spares(c, members, (4, 5))
    toggler = Toggler(spares, random.Random(SEED + 1))
    stop = threading.Event()
    results = []

    def changer():
        k = 0
        while not stop.is_set():
            through = members[k % 2]
            k += 1
            try:
                reply = command(through, *toggler.next(through), timeout=40)
                results.append(reply)
            except Exception as e:  # noqa: BLE001
                results.append(e)
            time.sleep(0.2)
    t = threading.Thread(target=changer, daemon=True)
    t.start()
    try:
        for _ in range(6):
            time.sleep(rng.uniform(0.2, 2.0))
            c.nodes[3].kill9()
            time.sleep(rng.uniform(0.0, 1.0))
            c.nodes[3].start()
    finally:
        stop.set()
        t.join(timeout=60)
    oks = [r for r in results if is_ok(r)]
    check(len(oks) >= 5, "only %d changes: %s" % (len(oks), results[-3:]))
    wait_for(lambda: all_on_latest(etcd, everyone), 30,
             "every node on etcd's latest epoch %d" % latest_epoch(etcd))
    contiguous_epochs(etcd, "restart loop")
    one_ring_per_epoch(everyone, "restart loop")


@bounded
def test_etcd_down_at_start():
    etcd = Etcd()  # Not started: its port stays unused.
    c = etcd_cluster(etcd)
    c.start()
    n4 = spare(c, 4)
    members = [c.nodes[i] for i in (1, 2, 3)]
    t0 = time.time()
    reply = command(c.nodes[1], *join_args(n4), timeout=60)
    check(isinstance(reply, bt.Err) and "etcd cannot be reached" in reply
          and time.time() - t0 < 25,
          "JOIN with etcd down (%.1f s): %s" % (time.time() - t0,
                                                bt.short(reply)))
    etcd.start()
    wait_for(lambda: etcd.records().keys() == {1}, 30,
             "epoch 1 recorded once etcd is up")
    reply = command(c.nodes[1], *join_args(n4), timeout=60)
    check(starts(reply, b"epoch 2: ring 1,2,3,4"),
          "JOIN once etcd is up: %s" % bt.short(reply))
    wait_for(lambda: converged(members + [n4], 2, moves=False), 30,
             "every node on epoch 2")


@bounded
def test_compaction():
    etcd, c, members = etcd_and_cluster()
    spares, everyone = with_spares(c, members, (4, 5))
    n3 = c.nodes[3]
    # Frozen node: its watch's connection stays open, unread.
    n3.send_signal(signal.SIGSTOP)
    try:
        for cmd in (join_args(spares[0]), join_args(spares[1]),
                    ("BIGSET.CLUSTER", "LEAVE", "4")):
            reply = command(c.nodes[1], *cmd)
            check(is_ok(reply), "%s: %s" % (cmd[1:3], bt.short(reply)))
        # Old ring keys deleted (docs/FORMATS.md allows it), then compacted.
        for e in (1, 2, 3):
            etcdctl(etcd.endpoint(), "del", ring_key(PREFIX, e))
        etcdctl(etcd.endpoint(), "compact", str(revision(etcd)), "--physical")
    finally:
        n3.send_signal(signal.SIGCONT)
    wait_for(lambda: converged(everyone, 4, moves=False), 30,
             "every node on epoch 4 after the frozen node resumed")
    # Down node: changes and a compaction meanwhile.
    n3.kill9()
    for cmd in (("BIGSET.CLUSTER", "LEAVE", "5"), join_args(spares[0])):
        reply = command(c.nodes[2], *cmd)
        check(is_ok(reply), "%s: %s" % (cmd[1:3], bt.short(reply)))
    etcdctl(etcd.endpoint(), "del", ring_key(PREFIX, 4))
    etcdctl(etcd.endpoint(), "del", ring_key(PREFIX, 5))
    etcdctl(etcd.endpoint(), "compact", str(revision(etcd)), "--physical")
    n3.start()
    wait_for(lambda: converged(everyone, 6, moves=False), 30,
             "every node on epoch 6 after the down node restarted")
    eq(ring_of(n3)[1], "1,2,3,4", "node 3's ring")
    one_ring_per_epoch(everyone, "compaction")
    reply = command(n3, "BIGSET.CLUSTER", "LEAVE", "4")
    check(starts(reply, b"epoch 7:"), "LEAVE 4: %s" % bt.short(reply))
    wait_for(lambda: converged(everyone, 7, moves=False), 30, "epoch 7")


def two_clusters(prefix_a, prefix_b):
    etcd = Etcd()
    etcd.start()
    ca = etcd_cluster(etcd, prefix=prefix_a)
    ca.start()
    wait_for(lambda: etcd.records(prefix_a).keys() == {1}, 30,
             "A's epoch 1 recorded")
    cb = etcd_cluster(etcd, prefix=prefix_b)
    cb.start()
    a4 = spare(ca, 4)
    b4 = spare(cb, 4)
    return etcd, ca, cb, a4, b4


@bounded
def test_two_prefixes():
    etcd, ca, cb, a4, b4 = two_clusters("/bigset/a", "/bigset/b")
    a = [ca.nodes[i] for i in (1, 2, 3)] + [a4]
    b = [cb.nodes[i] for i in (1, 2, 3)] + [b4]
    reply = command(cb.nodes[1], *join_args(b4))
    check(starts(reply, b"epoch 2: ring 1,2,3,4"),
          "JOIN 4 in B: %s" % bt.short(reply))
    reply = command(cb.nodes[2], "BIGSET.CLUSTER", "LEAVE", "1")
    check(starts(reply, b"epoch 3: ring 2,3,4"),
          "LEAVE 1 in B: %s" % bt.short(reply))
    reply = command(ca.nodes[3], *join_args(a4))
    check(starts(reply, b"epoch 2: ring 1,2,3,4"),
          "JOIN 4 in A: %s" % bt.short(reply))
    wait_for(lambda: converged(b, 3, moves=False), 30, "B on epoch 3")
    wait_for(lambda: converged(a, 2, moves=False), 30, "A on epoch 2")
    eq(ring_of(ca.nodes[1])[1], "1,2,3,4", "A's ring")
    eq(ring_of(cb.nodes[3])[1], "2,3,4", "B's ring")
    eq(sorted(etcd.records("/bigset/a")), [1, 2], "A's epochs")
    eq(sorted(etcd.records("/bigset/b")), [1, 2, 3], "B's epochs")
    check("/bigset/b" not in "".join(log_text(n) for n in a), "A's logs")


@bounded
def test_same_prefix():
    etcd, ca, cb, a4, b4 = two_clusters(PREFIX, PREFIX)
    time.sleep(2)
    ring_a = ring_of(ca.nodes[1])
    reply = command(cb.nodes[1], *join_args(b4))
    print("  JOIN 4 through cluster B: %s" % bt.short(reply))
    time.sleep(3)
    latest = max(etcd.records())
    raw = raw_records(etcd)[ring_key(PREFIX, latest)]
    _, text, change = decode_full(raw)
    b_ports = set(n.peer_port for n in cb.nodes.values())
    a_ports = set(n.peer_port for n in ca.nodes.values())
    peers = set(int(x) for x in re.findall(r"node \d+ 127\.0\.0\.1:(\d+)",
                                           text))
    got = command(cb.nodes[2], "BIGSET.CLUSTER", "GET")
    b_view = set(int(x) for x in re.findall(
        r"node \d+ 127\.0\.0\.1:(\d+)", got.decode()))
    print("  cluster B's node 2 now addresses cluster A's peers %s" %
          sorted(b_view & a_ports))
    check(ring_of(ca.nodes[1]) == ring_a and
          not (peers & a_ports and peers & b_ports),
          "a change through cluster B (%s; reply %s): cluster A's ring went "
          "from %s to %s; etcd's epoch %d names peers of both clusters "
          "(A %s, B %s): %s" %
          (change, bt.short(reply), ring_a, ring_of(ca.nodes[1]), latest,
           sorted(peers & a_ports), sorted(peers & b_ports),
           text.replace("\n", " | ")))


@bounded
def test_tls_wrong_ca():
    d = bt.tmpdir()
    certs = os.path.join(d, "etcd-certs")
    em.make_etcd_certs(certs)
    other = os.path.join(d, "other-certs")
    em.make_etcd_certs(other)  # Another CA, with its own client cert.
    etcd = Etcd(certs=certs)
    etcd.start()
    c = etcd_cluster(etcd, count=1, extra=["--etcd-tls-dir", other,
                                           "--n", "1", "--w", "1",
                                           "--r", "1"])
    c.start()
    n1 = c.nodes[1]
    t0 = time.time()
    reply = command(n1, "BIGSET.CLUSTER", "LEAVE", "1", timeout=60)
    took = time.time() - t0
    check(isinstance(reply, bt.Err) and took < 25 and
          re.search("TLS|certificate|handshake", reply),
          "a change with the wrong CA (%.1f s): %s" % (took,
                                                       bt.short(reply)))
    check(n1.client().sadd("k", "v") == 1, "node 1 writes")
    wait_for(lambda: re.search("etcd: TLS handshake.*(certificate|verify)",
                               log_text(n1)), 20,
             "the watch logs the TLS failure:\n" + n1.tail_log())
    eq(ring_of(n1), ("1", "1"), "ring")


TESTS = {
    "coordinator_kill9": test_coordinator_kill9,
    "etcd_sigstop": test_etcd_sigstop,
    "shutdown_during_change": test_shutdown_during_change,
    "frozen_member": test_frozen_member,
    "watch_half_open": test_watch_half_open,
    "late_txn": test_late_txn,
    "etcd_wiped": test_etcd_wiped,
    "wiped_stale_node": test_wiped_stale_node,
    "garbage_ring": test_garbage_ring,
    "garbage_epoch": test_garbage_epoch,
    "change_storm": test_change_storm,
    "restart_loop": test_restart_loop,
    "etcd_down_at_start": test_etcd_down_at_start,
    "compaction": test_compaction,
    "two_prefixes": test_two_prefixes,
    "same_prefix": test_same_prefix,
    "tls_wrong_ca": test_tls_wrong_ca,
}


if __name__ == "__main__":
    sys.exit(em.run(TESTS, SEED))
