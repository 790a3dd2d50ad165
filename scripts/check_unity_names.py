#!/usr/bin/env python3
"""Checks that no two sources of one library define the same namespace-level
constant.

Usage: check_unity_names.py [--stamp FILE] FILE...

A unity build (CI's) compiles a library's sources a few to a unit, and
which sources share a unit changes whenever one is added. Two files that
each define, say, `constexpr uint64_t kMax` in an anonymous namespace then
compile alone but not together: the build breaks in CI, far from the change
that moved the groups. Constants are where this happens here (a column-0
`constexpr` in a .cc file is at namespace level; clang-format puts it
there). Files are grouped by folder (one folder, one library). Exits 1,
naming each constant and its files (otherwise writes the --stamp file, for
the build). Share such a constant from one header instead.
"""
import argparse
import collections
import os
import re
import sys

from check_common import finish

CONSTANT = re.compile(r"^(?:inline\s+)?(?:static\s+)?constexpr\s[^=(;\n]*?"
                      r"\b([A-Za-z_]\w*)\s*(?:=|\{|\[)", re.M)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stamp", help="file written when the check passes")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    defined = collections.defaultdict(lambda: collections.defaultdict(set))
    for path in args.files:
        if not path.endswith(".cc"):
            continue
        folder = os.path.dirname(os.path.abspath(path))
        with open(path, encoding="utf-8") as f:
            for m in CONSTANT.finditer(f.read()):
                defined[folder][m.group(1)].add(os.path.basename(path))
    bad = [(folder, name, sorted(files))
           for folder, names in sorted(defined.items())
           for name, files in sorted(names.items()) if len(files) > 1]
    return finish([f"{os.path.relpath(folder)}: constant {name} defined in "
                   f"{', '.join(files)}: they collide when a unity build "
                   "puts them in one unit; define it once, in a header"
                   for folder, name, files in bad], args.stamp)


if __name__ == "__main__":
    sys.exit(main())
