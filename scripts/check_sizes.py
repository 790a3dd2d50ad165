#!/usr/bin/env python3
"""Checks the size limits of the library's sources.

Usage: check_sizes.py [--max-file N] [--max-function N] [--report K]
                      [--stamp FILE] FILE...

No file over --max-file lines (800), no function over --max-function lines
(120, from its signature to its closing brace), except the
functions in KNOWN, which may not grow. Functions are found the way
clang-format (Google style) lays them out: a definition at namespace level
starts at column 0 and ends at the next line that is a lone "}". Exits 1,
listing each violation (otherwise writes the --stamp file, for the
build); --report K prints the K largest files and
functions as well.
"""
import argparse
import re
import sys

from check_common import finish

# Functions allowed over the limit, with the size they may not exceed (none
# now: the last ones were split when the check was added).
KNOWN = {}

SKIP = re.compile(r"^(#|//|namespace\b|}|using\b|template\s*<[^>]*>\s*$|"
                  r"(struct|class|enum|union)\b[^(]*$|extern\b)")


def functions(path):
    """Yields (name, first line, line count) of each top-level function."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line or line[0].isspace() or SKIP.match(line):
            i += 1
            continue
        # Accumulate the declaration until it opens a body or ends.
        j = i
        text = line
        while (not re.search(r"[{;}]\s*(//.*)?$", lines[j]) and
               j + 1 < len(lines)):
            j += 1
            text += " " + lines[j].strip()
        if "(" in text and re.search(r"\{\s*(//.*)?$", lines[j]):
            k = j + 1
            while k < len(lines) and lines[k] != "}":
                k += 1
            m = re.search(r"([\w:~<>=!+\-*/\[\]]+)\s*\(", text)
            yield (m.group(1) if m else text[:40]), i + 1, k - i + 1
            i = k + 1
        else:
            i = j + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-file", type=int, default=800)
    ap.add_argument("--max-function", type=int, default=120)
    ap.add_argument("--report", type=int, default=0)
    ap.add_argument("--stamp", help="file written when every check passes")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    bad = []
    sizes = []
    funcs = []
    for path in args.files:
        n = open(path, encoding="utf-8").read().count("\n")
        sizes.append((n, path))
        if n > args.max_file:
            bad.append(f"{path}: {n} lines (limit {args.max_file})")
        if not path.endswith((".cc", ".h")):
            continue
        for name, first, count in functions(path):
            funcs.append((count, f"{path}:{first} {name}"))
            if count > args.max_function and count <= KNOWN.get(name, 0):
                continue
            if count > args.max_function:
                bad.append(f"{path}:{first}: {name} is {count} lines "
                           f"(limit {args.max_function})")
    if args.report:
        print("largest files:")
        for n, p in sorted(sizes, reverse=True)[:args.report]:
            print(f"  {n:5d} {p}")
        print("largest functions:")
        for n, p in sorted(funcs, reverse=True)[:args.report]:
            print(f"  {n:5d} {p}")
    return finish(bad, args.stamp)


if __name__ == "__main__":
    sys.exit(main())
