#!/usr/bin/env python3
"""Checks the include graph of the library against its layers.

Usage: check_layers.py [--stamp FILE] [--graph] SOURCE...

Each source belongs to the layer of its folder (include/bigset/<layer>/ or
lib/<layer>/). A file may include headers of its own layer and of the layers
below it, never above. Public headers (include/) include only public headers.
LevelDB headers appear only where the store is adapted to LevelDB (the
comparator, LevelDbStore) and in the testing layer. Exits 1, listing every
violation, if any rule is broken; otherwise writes the stamp file (for the
build) or, with --graph, prints the include graph between layers.
"""
import os
import re
import sys

from check_common import finish

LAYERS = ["core", "keys", "store", "net", "replica", "cluster", "testing",
          "network", "etcd"]
RANK = {name: i for i, name in enumerate(LAYERS)}
# Files that adapt bigset to LevelDB (or test on it) may include LevelDB.
LEVELDB_ALLOWED = re.compile(
    r"(include/bigset/keys/comparator\.h|lib/keys/comparator\.cc|"
    r"include/bigset/store/leveldb_store\.h|lib/store/leveldb_store\.cc|"
    r"lib/store/read_only_env\.(h|cc)|lib/store/pread_env\.(h|cc)|"
    r"lib/store/iterator_pool\.(h|cc)|"
    r"lib/store/write_batch\.cc|lib/store/write_batch_rep\.h|"
    r"include/bigset/testing/|lib/testing/)")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    path = path.replace(os.sep, "/")
    m = re.search(r"(?:^|/)include/bigset/([a-z_]+)/", path)
    if m:
        return m.group(1), True
    m = re.search(r"(?:^|/)lib/([a-z_]+)/", path)
    if m:
        return m.group(1), False
    return None, False


def target_layer(include):
    m = re.match(r"bigset/([a-z_]+)/", include)
    if m:
        return m.group(1), True
    m = re.match(r"([a-z_]+)/", include)
    if m and m.group(1) in RANK:
        return m.group(1), False
    return None, None


def main(argv):
    stamp = None
    graph = False
    sources = []
    i = 0
    while i < len(argv):
        if argv[i] == "--stamp":
            stamp = argv[i + 1]
            i += 2
        elif argv[i] == "--graph":
            graph = True
            i += 1
        else:
            sources.append(argv[i])
            i += 1
    errors = []
    edges = {}
    for path in sources:
        layer, public = layer_of(path)
        if layer is None:
            continue
        if layer not in RANK:
            errors.append(f"{path}: folder '{layer}' is not a layer")
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            if inc.startswith("leveldb/"):
                if not LEVELDB_ALLOWED.search(path.replace(os.sep, "/")):
                    errors.append(f"{path}: includes {inc} (LevelDB is only "
                                  "for the store's adapter)")
                continue
            target, target_public = target_layer(inc)
            if target is None:
                continue
            if target not in RANK:
                errors.append(f"{path}: includes {inc}, not in any layer")
                continue
            if public and not target_public:
                errors.append(f"{path}: public header includes internal "
                              f"header {inc}")
            if RANK[target] > RANK[layer]:
                errors.append(f"{path}: layer '{layer}' includes {inc} from "
                              f"the higher layer '{target}'")
            if target != layer:
                edges.setdefault(layer, set()).add(target)
    if graph and not errors:
        for layer in LAYERS:
            below = sorted(edges.get(layer, ()), key=RANK.get)
            print(f"{layer:>8} -> {', '.join(below) if below else '(none)'}")
    return finish(errors, stamp)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
