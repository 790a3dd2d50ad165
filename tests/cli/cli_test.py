#!/usr/bin/env python3
"""End-to-end tests of the bigset command-line tool: they run the built
binary the way an operator would and check its output and exit status.

Usage: cli_test.py BIGSET_BINARY TEST_NAME   (or "all")
Randomized cases use a fixed seed, printed on failure.
"""

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

BIGSET = None


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def run(*args, stdin=None, expect=0, db=None):
    """Runs bigset; returns (stdout bytes, stderr text). Checks the exit
    status against `expect` (None: any)."""
    cmd = [BIGSET]
    if db is not None:
        cmd += ["--db", db]
    cmd += list(args)
    p = subprocess.run(cmd, input=stdin, capture_output=True, timeout=900)
    err = p.stderr.decode("utf-8", "replace")
    if expect is not None and p.returncode != expect:
        raise Failure("%s: exit %d, expected %d\nstdout: %r\nstderr: %s" %
                      (" ".join(map(str, cmd))[:500], p.returncode, expect,
                       p.stdout[:2000], err[:2000]))
    return p.stdout, err


def lines(out):
    return out.decode("utf-8").splitlines()


def tree_digest(path):
    """A digest of every file under `path` (names and bytes)."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            h.update(os.path.relpath(full, path).encode())
            with open(full, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


# ---- Tests. Each takes a fresh temporary directory.

def test_round_trip(tmp):
    db = os.path.join(tmp, "db")
    out, _ = run("--create", "add", "fruits", "pear", "apple", "quince",
                 "fig", db=db)
    check(lines(out) == ["added 4 elements to fruits"], out)
    out, _ = run("members", "fruits", db=db)
    check(lines(out) == ["apple", "fig", "pear", "quince"], out)
    run("contains", "fruits", "apple", "pear", db=db, expect=0)
    out, _ = run("contains", "fruits", "apple", "kiwi", db=db, expect=1)
    check(lines(out) == ["apple\tyes", "kiwi\tno"], out)
    out, _ = run("range", "fruits", "--from", "b", "--to", "q", db=db)
    check(lines(out) == ["fig", "pear"], out)
    out, err = run("range", "fruits", "--limit", "2", db=db)
    check(lines(out) == ["apple", "fig"], out)
    check("--after fig" in err, err)
    out, _ = run("range", "fruits", "--after", "fig", "--limit", "2", db=db)
    check(lines(out) == ["pear", "quince"], out)
    out, _ = run("prefix", "fruits", "p", db=db)
    check(lines(out) == ["pear"], out)
    out, _ = run("remove", "fruits", "pear", "kiwi", db=db)
    check(lines(out) == ["removed 1 of 2 elements from fruits"], out)
    out, _ = run("count", "fruits", db=db)
    check(lines(out) == ["3"], out)
    # An add of a present element replaces its dot: still one key.
    run("add", "fruits", "apple", db=db)
    out, _ = run("dump", "fruits", db=db)
    kinds = [l.split("\t")[0] for l in lines(out)]
    check(kinds.count("element") == 3, out)
    check(kinds.count("clock") >= 1, out)
    elems = sorted(l.split("\t")[2] for l in lines(out)
                   if l.startswith("element"))
    check(elems == ["apple", "fig", "quince"], out)
    out, _ = run("sets", db=db)
    check(lines(out) == ["fruits"], out)
    out, _ = run("clock", "fruits", db=db)
    check("clock:" in out.decode() and "tombstone:" in out.decode(), out)
    out, _ = run("verify", db=db)
    check(lines(out)[-1].startswith("ok: 1 sets, 3 element keys"), out)
    # Clear, then sweep deletes the keys.
    run("clear", "fruits", db=db)
    out, _ = run("count", "fruits", db=db)
    check(lines(out) == ["0"], out)
    out, _ = run("--json", "sweep", db=db)
    swept = json.loads(out)
    check(swept["keys_deleted"] == 3, swept)
    out, _ = run("dump", "fruits", db=db)
    check(not any(l.startswith("element") for l in lines(out)), out)
    # Duplicates in a bulk add, within a batch and across batches, keep one
    # key per element (the filter that skips seeks must not skip these).
    run("add", "dups", "-", "--batch", "2", stdin=b"a\na\nb\na\nb\nc\n",
        db=db)
    out, _ = run("dump", "dups", db=db)
    elems = [l.split("\t")[2] for l in lines(out) if l.startswith("element")]
    check(elems == ["a", "b", "c"], out)
    run("count", "nosuchset", db=db, expect=1)
    run("members", "nosuchset", db=db, expect=1)


def test_sets_paged(tmp):
    db = os.path.join(tmp, "db")
    names = ["set%04d" % i for i in range(2500)]
    for n in names[::250]:
        run("--create", "add", n, "x", db=db)
    want = names[::250]
    out, _ = run("sets", db=db)
    check(lines(out) == want, out)
    out, _ = run("sets", "--limit", "3", db=db)
    check(lines(out) == want[:3], out)
    out, _ = run("sets", "--after", want[2], "--limit", "3", db=db)
    check(lines(out) == want[3:6], out)


def test_bulk_load(tmp):
    db = os.path.join(tmp, "db")
    n = int(os.environ.get("BIGSET_CLI_BULK", "1000000"))
    data = b"".join(b"element-%09d\n" % i for i in range(n))
    start = time.time()
    out, _ = run("--create", "add", "big", "-", stdin=data, db=db)
    secs = time.time() - start
    check(lines(out) == ["added %d elements to big" % n], out)
    out, _ = run("count", "big", db=db)
    check(lines(out) == [str(n)], out)
    out, _ = run("range", "big", "--from", "element-000500000", "--limit",
                 "2", db=db)
    check(lines(out) == ["element-000500000", "element-000500001"]
          if n > 500001 else True, out)
    # Loading the same lines again changes nothing but the dots.
    path = os.path.join(tmp, "again.txt")
    with open(path, "wb") as f:
        f.write(data[: 18 * 1000])
    run("load", "big", path, db=db)
    out, _ = run("count", "big", db=db)
    check(lines(out) == [str(n)], out)
    out, _ = run("--json", "verify", db=db)
    report = json.loads(out)
    check(report["ok"] and report["element_keys"] == n, report)
    print("bulk load: %d elements in %.1f s" % (n, secs))


def test_bulk_add_into_large_set(tmp):
    """Adds into a set much larger than the input (each line seeks its
    element's dots) and an input large enough against the set to read it
    into the filter midway (the set takes about 2.4 MB on disk: the read
    comes after about 2,400 lines): either way every add replaces the
    element's dots (one key per element) and the output is the same."""
    db = os.path.join(tmp, "db")
    n = 200000
    data = b"".join(b"e%07d\n" % i for i in range(n))
    out, _ = run("--create", "add", "big", "-", stdin=data, db=db)
    check(lines(out) == ["added %d elements to big" % n], out)
    run("compact", db=db)  # The set's size is then known to the store.

    def verify(expected):
        out, _ = run("count", "big", db=db)
        check(lines(out) == [str(expected)], out)
        out, _ = run("--json", "verify", db=db)
        report = json.loads(out)
        check(report["ok"] and report["element_keys"] == expected, report)

    # A small input: half present, half new, one line twice.
    small = [b"e%07d" % (i * 397) for i in range(500)]
    small += [b"n%04d" % i for i in range(500)]
    random.Random(7).shuffle(small)
    small.append(small[0])
    out, _ = run("add", "big", "-", stdin=b"\n".join(small) + b"\n", db=db)
    check(lines(out) == ["added %d elements to big" % len(small)], out)
    verify(n + 500)
    out, _ = run("--json", "members", "big", "--dots", db=db)
    rows = {json.loads(l)["element"]: json.loads(l)["dots"] for l in lines(out)}
    check(all(len(rows[e.decode()]) == 1 for e in small), "an element kept "
          "two dots")
    # A large input in small batches: 10,000 present, 10,000 new.
    large = [b"e%07d" % (i * 19) for i in range(10000)]
    large += [b"m%05d" % i for i in range(10000)]
    random.Random(8).shuffle(large)
    out, _ = run("add", "big", "-", "--batch", "100",
                 stdin=b"\n".join(large) + b"\n", db=db)
    check(lines(out) == ["added %d elements to big" % len(large)], out)
    verify(n + 500 + 10000)
    # And as a load from a file, with JSON output.
    path = os.path.join(tmp, "more.txt")
    with open(path, "wb") as f:
        f.write(b"".join(b"e%07d\n" % i for i in range(1000)) + b"z\n")
    out, _ = run("--json", "load", "big", path, db=db)
    check(json.loads(out) == {"added": 1001, "elements": 1001}, out)
    verify(n + 500 + 10000 + 1)


def test_json(tmp):
    db = os.path.join(tmp, "db")
    run("--create", "add", "s", "a", "b\"quote", "c\\back", "d\ttab",
        "é", db=db)
    out, _ = run("--json", "members", "s", "--dots", db=db)
    rows = [json.loads(l) for l in lines(out)]
    check([r["element"] for r in rows] ==
          sorted(["a", "b\"quote", "c\\back", "d\ttab", "é"],
                 key=lambda s: s.encode()), rows)
    check(all(len(r["dots"]) == 1 and len(r["dots"][0]) == 2 for r in rows),
          rows)
    out, _ = run("--json", "contains", "s", "a", "zz", db=db, expect=1)
    rows = [json.loads(l) for l in lines(out)]
    check([r["present"] for r in rows] == [True, False], rows)
    out, _ = run("--json", "count", "s", db=db)
    check(json.loads(out) == {"count": 5}, out)
    out, _ = run("--json", "stats", db=db)
    stats = json.loads(out)
    check(stats["sets"] == 1 and stats["set_sizes"][0]["set"] == "s", stats)
    check(stats["set_sizes"][0]["clock_dots"] == 5, stats)
    out, _ = run("--json", "dump", db=db)
    rows = [json.loads(l) for l in lines(out)]
    check(sum(r["kind"] == "element" for r in rows) == 5, rows)
    check(any(r["kind"] == "metadata" and r["name"] == "actor" for r in rows),
          rows)
    out, _ = run("--json", "clock", "s", db=db)
    c = json.loads(out)
    check(c["clock_dots"] == 5 and c["tombstone_dots"] == 0, c)
    out, _ = run("--json", "verify", db=db)
    check(json.loads(out)["ok"] is True, out)
    out, _ = run("--json", "sets", db=db)
    check([json.loads(l) for l in lines(out)] == [{"set": "s"}], out)


def test_hex_bytes(tmp):
    seed = 20261122
    rng = random.Random(seed)
    db = os.path.join(tmp, "db")
    specials = [b"", b"\x00", b"\x00\x00", b"\xff", b"\xff\x00", b"\n",
                b"a\nb", b"\\x41", b"\x1b[31m", b"\xc3\xa9", b"\xc3"]
    elements = set(specials)
    while len(elements) < 300:
        elements.add(bytes(rng.randrange(256)
                           for _ in range(rng.randrange(1, 24))))
    set_name = b"set\x00\xffname"
    data = b"".join(e.hex().encode() + b"\n" for e in elements)
    try:
        run("--hex", "--create", "add", set_name.hex(), "-", stdin=data,
            db=db)
        out, _ = run("--hex", "members", set_name.hex(), db=db)
        got = [bytes.fromhex(l) for l in lines(out)]
        check(got == sorted(elements), "hex members differ")
        # Text output: one line per element, whatever the bytes.
        out, _ = run("--hex", "sets", db=db)
        check(lines(out) == [set_name.hex()], out)
        # JSON: valid for any bytes; non-UTF-8 as {"hex": ...}.
        out, _ = run("--json", "dump", db=db)
        decoded = []
        for l in lines(out):
            r = json.loads(l)
            if r["kind"] != "element":
                continue
            e = r["element"]
            decoded.append(bytes.fromhex(e["hex"]) if isinstance(e, dict)
                           else e.encode("utf-8"))
        check(sorted(decoded) == sorted(elements), "json elements differ")
        # Text escapes keep one element per line.
        out, _ = run("dump", db=db)
        check(sum(l.startswith(b"element") for l in out.split(b"\n")) ==
              len(elements), "text dump lines")
        # Remove some by hex, check membership by hex.
        gone = sorted(elements)[:50]
        run("--hex", "remove", set_name.hex(), *[e.hex() for e in gone[1:]],
            db=db)
        run("--hex", "remove", set_name.hex(), "--", gone[0].hex(), db=db)
        run("--hex", "contains", set_name.hex(), gone[0].hex(), db=db,
            expect=1)
        keep = sorted(elements)[50:]
        run("--hex", "contains", set_name.hex(), *[e.hex() for e in keep],
            db=db, expect=0)
        out, _ = run("--hex", "count", set_name.hex(), db=db)
        check(lines(out) == [str(len(keep))], out)
    except Failure as f:
        raise Failure("seed %d: %s" % (seed, f))
    _, err = run("--hex", "add", "s", "zz", db=db, expect=2)
    check("INVALID_ARGUMENT" in err and "hex" in err, err)
    _, err = run("--hex", "add", "s", "abc", db=db, expect=2)
    check("odd length" in err, err)


def test_errors(tmp):
    db = os.path.join(tmp, "db")
    # No store: an error for reads and for writes without --create.
    _, err = run("members", "s", db=db, expect=2)
    check("NOT_FOUND" in err and "no bigset store" in err, err)
    _, err = run("add", "s", "x", db=db, expect=2)
    check("--create" in err, err)
    check(not os.path.exists(db), "a read or write created a store")
    # Bad arguments.
    _, err = run("members", db=db, expect=2)
    check("SET is required" in err, err)
    _, err = run("frobnicate", db=db, expect=2)
    _, err = run("members", "s", expect=2)
    check("--db" in err, err)
    _, err = run("--keyspace", "notanumber", "sets", db=db, expect=2)
    run("--create", "add", "s", "x", db=db)
    _, err = run("add", "s", "-", "--batch", "0", stdin=b"a\n", db=db,
                 expect=2)
    check("--batch" in err, err)
    _, err = run("load", "s", os.path.join(tmp, "missing.txt"), db=db,
                 expect=2)
    check("missing.txt" in err, err)
    # A store another process holds: a clear error naming the lock.
    holder = subprocess.Popen([BIGSET, "--db", db, "add", "s", "-"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        for args in (["members", "s"], ["add", "s", "y"], ["verify"]):
            _, err = run(*args, db=db, expect=2)
            check("UNAVAILABLE" in err and "in use by another process" in err
                  and "LOCK" in err, err)
    finally:
        holder.communicate(b"z\n", timeout=60)
    check(holder.returncode == 0, "holder failed")
    out, _ = run("members", "s", db=db)
    check(lines(out) == ["x", "z"], out)
    # A store created by another program (another comparator) is refused.
    # A directory that is not a store at all:
    junk = os.path.join(tmp, "junk")
    os.mkdir(junk)
    with open(os.path.join(junk, "CURRENT"), "w") as f:
        f.write("garbage\n")
    _, err = run("sets", db=junk, expect=2)
    check("bigset:" in err, err)


def damage_table(db):
    tables = sorted(f for f in os.listdir(db) if f.endswith(".ldb"))
    check(tables, "no table file to damage")
    path = os.path.join(db, max(tables, key=lambda f: os.path.getsize(
        os.path.join(db, f))))
    with open(path, "r+b") as f:
        size = os.path.getsize(path)
        f.seek(size // 3)
        block = bytearray(f.read(64))
        f.seek(size // 3)
        f.write(bytes(b ^ 0xFF for b in block))


def test_corrupted_and_repair(tmp):
    db = os.path.join(tmp, "db")
    data = b"".join(b"e%07d\n" % i for i in range(200000))
    run("--create", "add", "big", "-", stdin=data, db=db)
    run("add", "small", "a", "b", db=db)
    run("compact", db=db)
    out, _ = run("--json", "dump", db=db)
    old_actor = None
    for l in lines(out):
        r = json.loads(l)
        if r["kind"] == "element":
            old_actor = r["dot"][0]
            break
    damage_table(db)
    # A count answers from the set's kept count (no element read); a read
    # of the elements meets the damage.
    out, _ = run("count", "big", db=db)
    check(int(lines(out)[0]) == 200000, out)
    _, err = run("members", "big", db=db, expect=2)
    check("DATA_LOSS" in err and "repair" in err, err)
    _, err = run("verify", db=db, expect=2)
    check("DATA_LOSS" in err, err)
    # Reading a damaged store changes nothing.
    before = tree_digest(db)
    run("members", "big", db=db, expect=2)
    check(tree_digest(db) == before, "a read changed the damaged store")
    out, _ = run("repair", db=db)
    text = out.decode()
    check("LOST:" in text and "verify: ok" in text, text)
    check("actor retired" in text, text)
    check(os.path.isdir(os.path.join(db, "lost")), "nothing moved aside")
    out, _ = run("--json", "verify", db=db)
    check(json.loads(out)["ok"] is True, out)
    out, _ = run("count", "big", db=db)
    kept = int(lines(out)[0])
    check(0 < kept < 200000, "kept %d" % kept)
    # A new add does not reuse a counter: a new actor, and its dot is new.
    run("add", "big", "after-repair", db=db)
    out, _ = run("--json", "contains", "big", "after-repair", db=db)
    dot = json.loads(out)["dots"][0]
    check(dot[0] != old_actor, "the actor id was not retired")
    out, _ = run("--json", "dump", "big", db=db)
    dots = [tuple(json.loads(l)["dot"]) for l in lines(out)
            if json.loads(l)["kind"] == "element"]
    check(len(dots) == len(set(dots)), "a dot names two keys")
    out, _ = run("--json", "repair", db=db)
    report = json.loads(out)
    check(report["verify"]["ok"] and report["keyspace"]["loss_count"] == 0,
          report)
    # Repair of a path with no store is an error, not a new store.
    _, err = run("repair", db=os.path.join(tmp, "none"), expect=2)
    check("NOT_FOUND" in err, err)
    check(not os.path.exists(os.path.join(tmp, "none")), "repair created")


def test_read_only(tmp):
    db = os.path.join(tmp, "db")
    data = b"".join(b"x%05d\n" % i for i in range(20000))
    run("--create", "add", "s", "-", stdin=data, db=db)
    # The last writes are in LevelDB's log: a normal open would replay it
    # into a new table. A read must leave every file as it was.
    before = tree_digest(db)
    names = sorted(os.listdir(db))
    for args in (["count", "s"], ["members", "s"], ["dump"], ["stats"],
                 ["verify"], ["clock", "s"], ["sets"],
                 ["contains", "s", "x00001"]):
        run(*args, db=db)
    check(tree_digest(db) == before, "a read command changed the store")
    check(sorted(os.listdir(db)) == names, "a read command added files")


def test_help(tmp):
    out, _ = run("--help")
    text = out.decode()
    for cmd in ("sets", "members", "contains", "range", "prefix", "count",
                "clock", "add", "remove", "load", "dump", "stats", "verify",
                "compact", "repair", "sweep", "clear"):
        check(cmd in text, "--help lacks " + cmd)
        out, _ = run(cmd, "--help")
        check("Example" in out.decode(), cmd + " --help has no example")


def test_progress_off_in_pipes(tmp):
    db = os.path.join(tmp, "db")
    data = b"".join(b"p%06d\n" % i for i in range(50000))
    _, err = run("--create", "add", "s", "-", stdin=data, db=db)
    check(err == "", "progress output on a pipe: %r" % err)
    _, err = run("members", "s", db=db)
    check(err == "", err)


def run_tests(namespace, tmp_prefix):
    """Runs the test_* functions of `namespace` named by the command line
    (BIGSET_BINARY TEST_NAME|all), each in a fresh temporary directory."""
    global BIGSET
    if len(sys.argv) != 3:
        print(namespace.get("__doc__"))
        return 2
    BIGSET = os.path.abspath(sys.argv[1])
    tests = {name[len("test_"):]: fn for name, fn in namespace.items()
             if name.startswith("test_")}
    names = list(tests) if sys.argv[2] == "all" else [sys.argv[2]]
    failed = 0
    for name in names:
        tmp = tempfile.mkdtemp(prefix=tmp_prefix)
        try:
            tests[name](tmp)
            print("ok", name)
        except Failure as f:
            failed += 1
            print("FAIL", name, f)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_tests(globals(), "bigset-cli-"))
