#!/usr/bin/env python3
"""Adversarial end-to-end tests of the bigset command-line tool: awkward
input (elements starting with '-', empty lines, CR LF, a 10 MB line, bad
hex), keyspaces, repair run twice or against a store another process
holds, and verify/repair of a store damaged at the bigset level (a raw
LevelDB log record, written here byte by byte, overwrites a set-clock).

Usage: cli_attack_test.py BIGSET_BINARY TEST_NAME   (or "all")
Randomized cases use a fixed seed, printed on failure.
"""

import json
import os
import random
import struct
import subprocess
import sys
import time

# The runner and helpers of the tool's end-to-end tests (same directory).
import cli_test
from cli_test import check, lines, run, run_tests, tree_digest

# CRC32C and varints, shared with the other process tests.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "support"))
from wire_bytes import crc32c, varint  # noqa: E402


def hex_members(db, set_hex, *extra):
    out, _ = run("--hex", *extra, "members", set_hex, db=db)
    return lines(out)


# ---- Raw LevelDB bytes: a log record holding one write batch.

def log_record(payload):
    check(len(payload) < 32000, "record too big for one block")
    body = b"\x01" + payload  # kFullType
    crc = crc32c(body)
    crc = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    return struct.pack("<IH", crc, len(payload)) + body


def write_batch(seq, puts):
    out = struct.pack("<QI", seq, len(puts))
    for k, v in puts:
        out += b"\x01" + varint(len(k)) + k + varint(len(v)) + v
    return out


def inject_puts(db, puts):
    """Adds a log file (numbered above every file of the store) holding one
    write batch with a huge sequence number: the next open replays it."""
    numbers = [int(f.split(".")[0].split("-")[-1]) for f in os.listdir(db)
               if f.endswith((".log", ".ldb")) or f.startswith("MANIFEST-")]
    n = max(numbers) + 100
    with open(os.path.join(db, "%06d.log" % n), "wb") as f:
        f.write(log_record(write_batch(1 << 50, puts)))


def escape(b):
    return b.replace(b"\x00", b"\x00\xff") + b"\x00\x01"


def set_clock_key(ks, set_name):
    return (b"\x05\x02" + struct.pack(">I", ks) + b"\x02" + escape(set_name) +
            b"\x01\x00")


# ---- Tests. Each takes a fresh temporary directory.

def test_dash_elements(tmp):
    db = os.path.join(tmp, "db")
    out, _ = run("--create", "add", "s", "--", "-1", "--x", "-", "-h",
                 db=db)
    check(lines(out) == ["added 4 elements to s"], out)
    out, _ = run("members", "s", db=db)
    check(sorted(lines(out)) == sorted(["-1", "--x", "-", "-h"]), out)
    run("contains", "s", "--", "-1", "--x", "-h", db=db, expect=0)
    out, _ = run("contains", "s", "--", "-2", db=db, expect=1)
    check(lines(out) == ["-2\tno"], out)
    # A lone "-" is standard input: "-" itself comes from there.
    run("add", "t", "-", stdin=b"-\n--help\n-x\n", db=db)
    out, _ = run("members", "t", db=db)
    check(lines(out) == ["-", "--help", "-x"], out)
    run("remove", "s", "--", "--x", "-", db=db)
    out, _ = run("members", "s", db=db)
    check(sorted(lines(out)) == ["-1", "-h"], out)
    # A set named with a dash.
    run("add", "--", "-set", "v", db=db)
    out, _ = run("members", "--", "-set", db=db)
    check(lines(out) == ["v"], out)


def test_empty_and_crlf_lines(tmp):
    db = os.path.join(tmp, "db")
    # Elements are bytes: an empty line is the empty element, and a CR of
    # CR LF input stays part of its element (shown escaped).
    run("--create", "add", "s", "-", stdin=b"a\r\nb\r\n\n\nc", db=db)
    out, _ = run("count", "s", db=db)
    check(lines(out) == ["4"], out)
    check(hex_members(db, "73") == ["", "610d", "620d", "63"],
          hex_members(db, "73"))
    out, _ = run("members", "s", db=db)
    check(lines(out) == ["", "a\\r", "b\\r", "c"], out)
    out, _ = run("--json", "members", "s", db=db)
    check([json.loads(l)["element"] for l in lines(out)] ==
          ["", "a\r", "b\r", "c"], out)
    out, _ = run("contains", "s", "a", db=db, expect=1)
    run("contains", "s", "", "c", db=db, expect=0)
    # With --hex, a CR is not a hex digit: the line is refused by number.
    _, err = run("--hex", "add", "73", "-", stdin=b"6162\r\n", db=db,
                 expect=2)
    check("input line 1" in err, err)
    out, _ = run("count", "s", db=db)
    check(lines(out) == ["4"], out)
    run("verify", db=db)


def test_huge_line(tmp):
    db = os.path.join(tmp, "db")
    big = b"x" * (10 * 1000 * 1000)
    run("--create", "add", "s", "-", stdin=big + b"\nsmall\n" + big[:-1],
        db=db)
    out, _ = run("count", "s", db=db)
    check(lines(out) == ["3"], out)
    out, _ = run("members", "s", db=db)
    got = out.split(b"\n")
    check(got[:-1] == [b"small", big[:-1], big] and got[-1] == b"",
          [len(g) for g in got])
    out, _ = run("--json", "verify", db=db)
    check(json.loads(out)["ok"] is True, out)
    run("remove", "s", "-", stdin=big + b"\n", db=db)
    out, _ = run("count", "s", db=db)
    check(lines(out) == ["2"], out)


def test_bad_hex_line(tmp):
    seed = 20260211
    rng = random.Random(seed)
    db = os.path.join(tmp, "db")
    run("--create", "add", "s", "seed", db=db)
    for batch in (1000, 7, 1):
        bad_at = rng.randrange(1, 3000)  # 1-based line number
        good = ["%08x" % (batch * 100000 + i) for i in range(1, 3001)]
        bad = rng.choice(["zz", "abc", "0g", "61 62", "0x61", "6162\r"])
        data = "\n".join(good[:bad_at - 1] + [bad] + good[bad_at - 1:])
        set_hex = b"b%d" % batch
        set_hex = set_hex.hex()
        _, err = run("--hex", "add", set_hex, "-", "--batch", str(batch),
                     stdin=data.encode() + b"\n", db=db, expect=2)
        info = "seed %d batch %d bad line %d %r: %s" % (seed, batch, bad_at,
                                                        bad, err)
        check("input line %d:" % bad_at in err, info)
        # Only the bad line is quoted, never a later one.
        check(good[bad_at - 1] not in err, info)
        applied = (bad_at - 1) // batch * batch
        check("(%d elements were applied before it)" % applied in err, info)
        if applied == 0:
            run("--hex", "count", set_hex, db=db, expect=1)
            continue
        got = hex_members(db, set_hex)
        check(got == sorted(good[:applied]), info)
    run("verify", db=db)


def test_keyspaces(tmp):
    db = os.path.join(tmp, "db")
    run("--create", "add", "s", "zero", db=db)
    run("--keyspace", "5", "add", "s", "five", db=db)
    run("--keyspace", "4294967295", "add", "s", "max", db=db)
    out, _ = run("members", "s", db=db)
    check(lines(out) == ["zero"], out)
    out, _ = run("--keyspace", "5", "members", "s", db=db)
    check(lines(out) == ["five"], out)
    out, _ = run("--keyspace", "4294967295", "members", "s", db=db)
    check(lines(out) == ["max"], out)
    run("--keyspace", "6", "members", "s", db=db, expect=1)
    _, err = run("--keyspace", "4294967296", "sets", db=db, expect=2)
    _, err = run("--keyspace", "-1", "sets", db=db, expect=2)
    for ks in ("0", "5", "4294967295"):
        out, _ = run("--keyspace", ks, "--json", "verify", db=db)
        check(json.loads(out)["ok"] is True, (ks, out))
    # Repairing one keyspace leaves the others' keys as they were.
    dumps = {}
    for ks in ("0", "4294967295"):
        dumps[ks], _ = run("--keyspace", ks, "--json", "dump", db=db)
    out, _ = run("--keyspace", "5", "--json", "repair", db=db)
    report = json.loads(out)
    check(report["keyspace"]["keyspace"] == 5 and report["verify"]["ok"],
          report)
    for ks in ("0", "4294967295"):
        out, _ = run("--keyspace", ks, "--json", "dump", db=db)
        check(out == dumps[ks], "repair of keyspace 5 changed keyspace " + ks)
    out, _ = run("--keyspace", "5", "members", "s", db=db)
    check(lines(out) == ["five"], out)


def test_repair_twice(tmp):
    db = os.path.join(tmp, "db")
    data = b"".join(b"r%05d\n" % i for i in range(5000))
    run("--create", "add", "s", "-", stdin=data, db=db)
    run("clear", "s", db=db)
    run("add", "s", "kept", "other", db=db)
    before, _ = run("members", "s", db=db)
    out, _ = run("--json", "repair", db=db)
    first = json.loads(out)
    check(first["verify"]["ok"] and first["keyspace"]["loss_count"] == 0,
          first)
    out, _ = run("--json", "repair", db=db)
    second = json.loads(out)
    ks = second["keyspace"]
    check(second["verify"]["ok"] and ks["loss_count"] == 0 and
          ks["sweep_fixes"] == 0 and ks["keys_deleted"] == 0 and
          ks["clocks_rebuilt"] == 0, second)
    check(ks["old_actor"] == first["keyspace"]["new_actor"], second)
    check(ks["new_actor"] != ks["old_actor"], second)
    out, _ = run("members", "s", db=db)
    check(out == before, out)
    check(lines(out) == ["kept", "other"], out)
    # The store still works: sweep, add, verify.
    run("sweep", db=db)
    run("add", "s", "new", db=db)
    run("verify", db=db)


def test_repair_while_held(tmp):
    db = os.path.join(tmp, "db")
    run("--create", "add", "s", "x", "y", db=db)
    holder = subprocess.Popen([cli_test.BIGSET, "--db", db, "add", "s", "-"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        before = tree_digest(db)
        names = sorted(os.listdir(db))
        _, err = run("repair", db=db, expect=2)
        check("UNAVAILABLE" in err and "in use by another process" in err,
              err)
        check(sorted(os.listdir(db)) == names,
              "repair of a held store changed its files: %s -> %s" %
              (names, sorted(os.listdir(db))))
        check(tree_digest(db) == before, "repair changed a held store")
    finally:
        holder.communicate(b"z\n", timeout=60)
    check(holder.returncode == 0, "holder failed")
    out, _ = run("members", "s", db=db)
    check(lines(out) == ["x", "y", "z"], out)
    run("verify", db=db)


def test_verify_damaged_set_clock(tmp):
    db = os.path.join(tmp, "db")
    run("--create", "add", "fruits", "apple", "pear", db=db)
    run("add", "veg", "leek", db=db)
    out, _ = run("--json", "dump", "fruits", db=db)
    old_dots = {tuple(json.loads(l)["dot"]) for l in lines(out)
                if json.loads(l)["kind"] == "element"}
    # Overwrite the set-clock header of "fruits" with garbage.
    inject_puts(db, [(set_clock_key(0, b"fruits"), b"\xde\xad\xbe\xef")])
    before = tree_digest(db)
    out, _ = run("verify", db=db, expect=1)
    text = out.decode()
    check("fruits" in text and "set-clock" in text, text)
    out, _ = run("--json", "verify", db=db, expect=1)
    check(json.loads(out)["ok"] is False, out)
    check(tree_digest(db) == before, "verify changed the damaged store")
    # Reads still work on the undamaged set.
    out, _ = run("members", "veg", db=db)
    check(lines(out) == ["leek"], out)
    # Repair: the clock is rebuilt from the element keys, and reported.
    out, _ = run("--json", "repair", db=db)
    report = json.loads(out)
    check(report["verify"]["ok"], report)
    check(report["keyspace"]["clocks_rebuilt"] == 1, report)
    check(report["keyspace"]["loss_count"] >= 1, report)
    check(any("fruits" in l for l in report["keyspace"]["losses"]), report)
    run("verify", db=db)
    out, _ = run("members", "fruits", db=db)
    check(lines(out) == ["apple", "pear"], out)
    # A new add never reuses a dot.
    run("add", "fruits", "fig", db=db)
    out, _ = run("--json", "dump", "fruits", db=db)
    dots = [tuple(json.loads(l)["dot"]) for l in lines(out)
            if json.loads(l)["kind"] == "element"]
    check(len(dots) == 3 and len(set(dots)) == 3, dots)
    check(len(set(dots) - old_dots) == 1, dots)
    out, _ = run("--json", "repair", db=db)
    check(json.loads(out)["keyspace"]["loss_count"] == 0, out)


def test_verify_garbage_keys(tmp):
    seed = 77031
    rng = random.Random(seed)
    db = os.path.join(tmp, "db")
    run("--create", "add", "s", "a", "b", "c", db=db)
    prefix = b"\x05\x02" + struct.pack(">I", 0)
    puts = [(prefix, b"bare"),
            (prefix + b"\x03junk", b"section 3"),
            (prefix + b"\x02" + bytes(rng.randrange(256) for _ in range(9)),
             b"set garbage")]
    inject_puts(db, puts)
    out, _ = run("--json", "verify", db=db, expect=1)
    check(json.loads(out)["problem_count"] >= 2, (seed, out))
    out, _ = run("--json", "repair", db=db)
    report = json.loads(out)
    check(report["verify"]["ok"], (seed, report))
    check(report["keyspace"]["keys_deleted"] >= 2, (seed, report))
    out, _ = run("members", "s", db=db)
    check(lines(out) == ["a", "b", "c"], out)
    out, _ = run("--json", "repair", db=db)
    check(json.loads(out)["keyspace"]["loss_count"] == 0, out)


if __name__ == "__main__":
    sys.exit(run_tests(globals(), "bigset-cli-attack-"))
