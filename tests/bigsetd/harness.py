"""The harness the process tests of bigsetd share (bigsetd_test.py,
bigsetd_attack_test.py and the etcd tests): checks, loopback ports,
processes stopped by pid, temporary directories, logs and memory of
processes, a raw RESP2/RESP3 client, and the loop that runs named tests
and reports each one. The network and bigset-load tests take their ports
and process helpers from here too.

Every process started through `spawn` (or added to PROCS) and every
directory from `tmpdir` is stopped or removed by `cleanup`, which the test
loop calls after each test, also when it fails.
"""

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import traceback

PROCS = []        # Every process started by the running test.
TMPDIRS = []      # Every temporary directory of the running test.
AT_CLEANUP = []   # Callables run by cleanup, after the processes stopped.


class Failure(Exception):
    pass


class Skip(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def eq(got, want, what):
    if got != want:
        raise Failure("%s: got %s, expected %s" %
                      (what, short(got), short(want)))


def short(v, n=300):
    s = repr(v)
    return s if len(s) <= n else s[:n] + "...(%d chars)" % len(s)


_USED_PORTS = set()
# Seeded by the process id: two tests running at once pick apart.
_PORT_RNG = random.Random(os.getpid())


def free_port():
    """A port below the kernel's ephemeral range (32768 and up on Linux),
    free now: a node restarted on its port must find it free, and a port
    from the ephemeral range may meanwhile be the source port of some
    outgoing connection (tests run two at a time)."""
    while True:
        port = _PORT_RNG.randrange(20000, 32000)
        if port in _USED_PORTS:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        _USED_PORTS.add(port)
        return port


def wait_for(pred, timeout, what, interval=0.1):
    deadline = time.time() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.time() >= deadline:
            raise Failure("not within %ds: %s" % (timeout, what))
        time.sleep(interval)


def tmpdir(prefix="bigsetd-test-"):
    d = tempfile.mkdtemp(prefix=prefix)
    TMPDIRS.append(d)
    return d


def spawn(cmd, **kw):
    p = subprocess.Popen(cmd, **kw)
    PROCS.append(p)
    return p


def stop_process(p, sig=signal.SIGTERM, timeout=10):
    """Stops p by pid: SIGCONT (a stopped process takes no other signal),
    sig, and SIGKILL if it is still there after `timeout` seconds. Returns
    the exit status (negative: killed by a signal)."""
    if p.poll() is None:
        try:
            os.kill(p.pid, signal.SIGCONT)
            os.kill(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=30)
    return p.returncode


def rss_kb(pid):
    """The resident memory of process `pid` in KiB (0 if not found)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def file_text(path, last=None, offset=0):
    """The text of the file at `path` (a process's log) from byte `offset`,
    or its `last` bytes; "" if it cannot be read: a log read to explain a
    failure must not fail itself."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return ""
    if last is not None:
        data = data[-last:]
    return data.decode("utf-8", "replace")


def cleanup():
    """Stops every process of the test by pid (SIGCONT, SIGTERM, SIGKILL
    after 10 s), runs AT_CLEANUP, removes the temporary directories."""
    for p in PROCS:
        if p.poll() is None:
            try:
                os.kill(p.pid, signal.SIGCONT)
                os.kill(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.time() + 10
    for p in PROCS:
        try:
            p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=30)
    del PROCS[:]
    for f in AT_CLEANUP:
        f()
    for d in TMPDIRS:
        shutil.rmtree(d, ignore_errors=True)
    del TMPDIRS[:]


# ---- A raw RESP2/RESP3 client, for exact replies and reply types.

class Err(str):
    """An error reply (its text, e.g. "ERR unknown command ...")."""


class RSet(list):
    """A RESP3 set reply (~), in the order the server sent it."""


class RMap(dict):
    """A RESP3 map reply (%)."""


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Resp:
    def __init__(self, port, timeout=10, password=None):
        self.sock = socket.create_connection(("127.0.0.1", port),
                                             timeout=timeout)
        self.buf = bytearray()
        self.pos = 0
        self.kind = None  # The type byte of the last top-level reply.
        if password is not None:
            eq(self.command("AUTH", password), "OK", "AUTH")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        self.sock.sendall(data)

    def command(self, *args):
        self.send(encode(*args))
        return self.read()

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise EOFError("connection closed by the server")
        if self.pos > (1 << 20):
            del self.buf[:self.pos]
            self.pos = 0
        self.buf += chunk

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = bytes(self.buf[self.pos:i])
                self.pos = i + 2
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        data = bytes(self.buf[self.pos:self.pos + n])
        check(self.buf[self.pos + n:self.pos + n + 2] == b"\r\n",
              "a bulk reply not ended by CRLF")
        self.pos += n + 2
        return data

    def read(self):
        v, kind = self._value()
        self.kind = kind
        return v

    def _value(self):
        line = self._line()
        t, rest = line[:1].decode("latin-1"), line[1:]
        if t == "+":
            return rest.decode("utf-8", "replace"), t
        if t == "-":
            return Err(rest.decode("utf-8", "replace")), t
        if t in ":(":
            return int(rest), t
        if t == ",":
            return float(rest), t
        if t == "#":
            return rest == b"t", t
        if t == "_":
            return None, t
        if t in "$=!":
            n = int(rest)
            if n < 0:
                return None, t
            data = self._exact(n)
            if t == "=":
                data = data[4:]  # "txt:"
            if t == "!":
                return Err(data.decode("utf-8", "replace")), t
            return data, t
        if t in "*~>":
            n = int(rest)
            if n < 0:
                return None, t
            items = [self._value()[0] for _ in range(n)]
            return (RSet(items) if t == "~" else items), t
        if t == "%":
            m = RMap()
            for _ in range(int(rest)):
                k = self._value()[0]
                m[k] = self._value()[0]
            return m, t
        if t == "|":  # Attributes come before the reply they describe.
            for _ in range(2 * int(rest)):
                self._value()
            return self._value()
        raise Failure("unparsable reply line %r" % line[:100])

    def closed_within(self, timeout):
        """True if the server closes the connection within `timeout` s
        (anything it sends meanwhile is discarded)."""
        self.sock.settimeout(timeout)
        deadline = time.time() + timeout
        try:
            while time.time() < deadline:
                if not self.sock.recv(1 << 16):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        return False


def read_until_closed(sock, deadline=None):
    """What `sock` receives until the peer closes it, its timeout passes
    without a byte, or time.time() passes `deadline`: (the bytes, whether
    the peer closed; a reset counts as closed)."""
    got = bytearray()
    try:
        while deadline is None or time.time() < deadline:
            chunk = sock.recv(1 << 16)
            if not chunk:
                return bytes(got), True
            got += chunk
    except (ConnectionResetError, BrokenPipeError):
        return bytes(got), True
    except socket.timeout:
        pass
    return bytes(got), False


def flat_pairs(v):
    """A map reply, RESP2 flat array or RESP3 map, as a dict with str
    keys."""
    if isinstance(v, dict):
        items = list(v.items())
    else:
        check(isinstance(v, list) and len(v) % 2 == 0,
              "not a flat list of pairs: %s" % short(v))
        items = list(zip(v[0::2], v[1::2]))
    out = {}
    for k, val in items:
        out[k.decode() if isinstance(k, bytes) else k] = val
    return out


def run_tests(tests, names, seed, on_failure=lambda name: None):
    """Runs tests[name]() for each name, printing "PASS name (time)",
    "SKIP name: reason" or "FAIL name: reason (seed N)"; on_failure(name)
    prints what helps (node logs). cleanup() follows every test. Returns
    the exit status: 1 if any test failed."""
    failed = 0
    for n in names:
        start = time.time()
        try:
            tests[n]()
            print("PASS %s (%.1fs)" % (n, time.time() - start), flush=True)
        except Skip as e:
            print("SKIP %s: %s" % (n, e), flush=True)
        except Exception as e:  # noqa: BLE001 (report and go on)
            failed += 1
            msg = str(e) or type(e).__name__
            if not isinstance(e, Failure):
                msg = "%s: %s" % (type(e).__name__, msg)
                traceback.print_exc()
            print("FAIL %s: %s (seed %d)" % (n, msg, seed), flush=True)
            on_failure(n)
        finally:
            cleanup()
    return 1 if failed else 0
