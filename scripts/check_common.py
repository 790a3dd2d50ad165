"""How the build's source checks (check_layers.py, check_sizes.py,
check_unity_names.py) end: each problem on stderr and exit status 1, or the
stamp file written (the output meson's custom target waits for) and 0."""

import sys


def finish(problems, stamp):
    """Prints `problems` (strings) to stderr; returns 1 if there are any,
    else writes "ok" to the file `stamp` (if given) and returns 0."""
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    if stamp:
        with open(stamp, "w", encoding="utf-8") as f:
            f.write("ok\n")
    return 0
