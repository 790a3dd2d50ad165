#!/usr/bin/env python3
"""Prints the benchmark figures the issues name, as ratios measured in one run.

Usage: bench_ratios.py bench.json   (Google Benchmark JSON output)

With --benchmark_repetitions=K, every figure uses the median of the K runs.
"""
import json
import re
import sys


def main(path):
    with open(path) as f:
        benchmarks = json.load(f)["benchmarks"]
    runs = {}
    for b in benchmarks:
        # Benchmarks with a fixed iteration count carry "/iterations:N".
        for key in ("name", "run_name"):
            if key in b:
                b[key] = re.sub(r"/iterations:\d+", "", b[key])
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                runs[b["run_name"]] = b  # Wins over single repetitions.
        elif b.get("run_name", b["name"]) not in runs or b.get("repetitions", 1) <= 1:
            runs.setdefault(b.get("run_name", b["name"]), b)

    def time(name):
        b = runs[name]
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        return b["real_time"] * scale

    def ips(name):
        return runs[name]["items_per_second"]

    def have(*names):
        return all(n in runs for n in names)

    rows = []

    def row(figure, value, target, ok):
        rows.append((figure, value, target, "yes" if ok else "NO"))

    if have("BM_ClockEncodedSize/gap_then_1M"):
        v = runs["BM_ClockEncodedSize/gap_then_1M"]["bytes"]
        row("clock bytes, gap then 1M", f"{v:.0f}", "<= 48", v <= 48)
    if have("BM_ClockEncodedSize/scattered_100k_of_1M"):
        v = runs["BM_ClockEncodedSize/scattered_100k_of_1M"]["bytes"]
        row("clock bytes, 100k scattered of 1M", f"{v:.0f}", "<= 137500", v <= 137500)
    if have("BM_Compare/bigset", "BM_Compare/bytewise"):
        r = time("BM_Compare/bigset") / time("BM_Compare/bytewise")
        row("comparator time / bytewise", f"{r:.2f}", "(report)", True)
    lat = "BM_InsertLatency/{}/cardinality:{}"
    if have(lat.format("bigset", 1000), lat.format("bigset", 1000000),
            lat.format("rawleveldb", 1000), lat.format("rawleveldb", 1000000)):
        bg = time(lat.format("bigset", 1000000)) / time(lat.format("bigset", 1000))
        rg = time(lat.format("rawleveldb", 1000000)) / time(lat.format("rawleveldb", 1000))
        row("insert latency growth 1k->1M: bigset / (1.5 x raw)",
            f"{bg:.2f} / {1.5 * rg:.2f}", "bigset <= 1.5 x raw", bg <= 1.5 * rg)
    if have(lat.format("bigset", 100000), lat.format("onevalue", 100000)):
        r = time(lat.format("onevalue", 100000)) / time(lat.format("bigset", 100000))
        row("onevalue / bigset insert time at 100k", f"{r:.0f}x", ">= 100x", r >= 100)
    if have("BM_InsertThroughput/bigset", "BM_InsertThroughput/rawleveldb"):
        r = ips("BM_InsertThroughput/bigset") / ips("BM_InsertThroughput/rawleveldb")
        row("insert throughput bigset / raw", f"{r:.2f}", ">= 0.75", r >= 0.75)
    if have("BM_InsertThroughput/bigset_sync", "BM_InsertThroughput/rawleveldb_sync"):
        r = ips("BM_InsertThroughput/bigset_sync") / ips("BM_InsertThroughput/rawleveldb_sync")
        row("sync insert throughput (4 writers) bigset / raw", f"{r:.2f}", ">= 0.8", r >= 0.8)
    if have("BM_InsertCloud/cloud:0", "BM_InsertCloud/cloud:1000000"):
        r = time("BM_InsertCloud/cloud:1000000") / time("BM_InsertCloud/cloud:0")
        row("insert time, 1M-dot cloud / clean clock", f"{r:.2f}", "<= 1.3", r <= 1.3)
    if have("BM_ApplyScattered/cloud:0", "BM_ApplyScattered/cloud:1000000"):
        r = time("BM_ApplyScattered/cloud:1000000") / time("BM_ApplyScattered/cloud:0")
        row("scattered apply time, 1M-dot cloud / clean", f"{r:.2f}", "<= 2", r <= 2)
    for n in (0, 10000, 100000, 1000000):
        for b in ("BM_InsertCloud", "BM_ApplyScattered"):
            name = f"{b}/cloud:{n}"
            if have(name) and "bytes_written" in runs[name]:
                row(f"{name} bytes written per op", f"{runs[name]['bytes_written']:.0f}", "(report)", True)
    if have("BM_FullRead/bigset/1000000", "BM_FullRead/rawleveldb/1000000"):
        r = ips("BM_FullRead/bigset/1000000") / ips("BM_FullRead/rawleveldb/1000000")
        row("full read bigset / raw", f"{r:.2f}", ">= 0.5", r >= 0.5)
    if have("BM_Contains/bigset/1000000", "BM_Get/rawleveldb/1000000"):
        r = time("BM_Contains/bigset/1000000") / time("BM_Get/rawleveldb/1000000")
        row("contains time / raw get", f"{r:.2f}", "<= 3", r <= 3)
    if have("BM_ClusterInsert/n:3/w:2", "BM_InsertThroughput/bigset"):
        r = ips("BM_ClusterInsert/n:3/w:2") / ips("BM_InsertThroughput/bigset")
        row("cluster insert / replica insert", f"{r:.3f}", ">= 0.25", r >= 0.25)
    if have("BM_ClusterInsert/n:3/w:2", "BM_ClusterInsertFloor/three_replicas"):
        r = ips("BM_ClusterInsert/n:3/w:2") / ips("BM_ClusterInsertFloor/three_replicas")
        row("cluster insert / three bare replica writes", f"{r:.3f}", "(report)", True)
    if have("BM_ClusterFullRead/r:2/1000000", "BM_FullRead/bigset/1000000"):
        r = ips("BM_ClusterFullRead/r:2/1000000") / ips("BM_FullRead/bigset/1000000")
        row("cluster full read / replica full read", f"{r:.3f}", ">= 0.4", r >= 0.4)

    if have("BM_SetTransfer/replica/1000000", "BM_FullRead/bigset/1000000"):
        r = ips("BM_SetTransfer/replica/1000000") / ips("BM_FullRead/bigset/1000000")
        row("set transfer, replica to replica / full read", f"{r:.3f}", "(report)", True)
    if have("BM_HandOff/1000000", "BM_FullRead/bigset/1000000"):
        r = ips("BM_HandOff/1000000") / ips("BM_FullRead/bigset/1000000")
        row("hand-off, node to node / full read", f"{r:.3f}", ">= 0.5", r >= 0.5)
    if have("BM_HandOffCeiling/rawleveldb/1000000", "BM_FullRead/bigset/1000000"):
        r = ips("BM_HandOffCeiling/rawleveldb/1000000") / ips("BM_FullRead/bigset/1000000")
        row("raw LevelDB sorted batch write (hand-off ceiling) / full read", f"{r:.3f}", "(report)", True)
    if have("BM_HandOff/1000000", "BM_HandOffCeiling/rawleveldb/1000000"):
        r = ips("BM_HandOff/1000000") / ips("BM_HandOffCeiling/rawleveldb/1000000")
        row("hand-off / raw LevelDB sorted batch write", f"{r:.3f}", "(report)", True)
    if have("BM_HandOff/1000000", "BM_HandOff/2000000"):
        a = runs["BM_HandOff/1000000"].get("peak_rss_growth_mb", 0)
        b = runs["BM_HandOff/2000000"].get("peak_rss_growth_mb", 0)
        row("hand-off peak RSS growth, 1M / 2M elements (MB)", f"{a:.1f} / {b:.1f}", "(report)", True)

    if have("BM_CountAfterClear/1000000", "BM_Count/fresh/1000"):
        r = time("BM_CountAfterClear/1000000") / time("BM_Count/fresh/1000")
        row("count after clear+sweep / fresh count", f"{r:.2f}", "<= 2", r <= 2)
    if have("BM_CountAfterClear/1000000/unswept", "BM_Count/fresh/1000"):
        r = time("BM_CountAfterClear/1000000/unswept") / time("BM_Count/fresh/1000")
        row("count after clear, unswept / fresh count", f"{r:.0f}", "(report)", True)
    if have("BM_Sweep/1000000", "BM_Delete/rawleveldb/1000000"):
        # Both delete the same million keys per iteration: wall-clock time
        # (the sweep's final compaction runs on LevelDB's thread).
        r = time("BM_Delete/rawleveldb/1000000") / time("BM_Sweep/1000000")
        row("sweep keys/s / raw delete keys/s", f"{r:.2f}", ">= 0.5", r >= 0.5)
    if have("BM_SpaceAfterSweep/1000000", "BM_SpaceAfterSweep/fresh"):
        a = runs["BM_SpaceAfterSweep/1000000"]["bytes"]
        b = runs["BM_SpaceAfterSweep/fresh"]["bytes"]
        row("space after sweep / fresh", f"{a / b:.3f}", "<= 1.2", a / b <= 1.2)
    if have("BM_InsertLatency/during_sweep", "BM_InsertLatency/no_sweep"):
        r = time("BM_InsertLatency/during_sweep") / time("BM_InsertLatency/no_sweep")
        row("insert latency during sweep / no sweep", f"{r:.2f}", "<= 1.5", r <= 1.5)

    if have("BM_AntiEntropy/missing:10/1000000"):
        v = runs["BM_AntiEntropy/missing:10/1000000"]["bytes"]
        row("anti-entropy bytes, 10 missed updates of 1M", f"{v:.0f}", "<= 16384", v <= 16384)
    if have("BM_AntiEntropy/equal/sets:10000"):
        b = runs["BM_AntiEntropy/equal/sets:10000"]
        row("anti-entropy bytes per round, 10,000 equal sets", f"{b['bytes']:.0f}", "<= 4096", b["bytes"] <= 4096)
        row("  element keys read per round", f"{b['keys_read']:.0f}", "0", b["keys_read"] == 0)
    if have("BM_AntiEntropy/full/1000000", "BM_FullRead/bigset/1000000"):
        r = ips("BM_AntiEntropy/full/1000000") / ips("BM_FullRead/bigset/1000000")
        row("anti-entropy full exchange / full read", f"{r:.3f}", ">= 0.4", r >= 0.4)
    if have("BM_AntiEntropy/full/1000000", "BM_HandOffCeiling/rawleveldb/1000000"):
        r = ips("BM_AntiEntropy/full/1000000") / ips("BM_HandOffCeiling/rawleveldb/1000000")
        row("anti-entropy full exchange / raw LevelDB sorted batch write", f"{r:.3f}", "(report)", True)
    if have("BM_InsertThroughput/bigset", "BM_InsertThroughput/bigset_no_digests"):
        r = ips("BM_InsertThroughput/bigset") / ips("BM_InsertThroughput/bigset_no_digests")
        row("insert with anti-entropy digests / without", f"{r:.3f}", ">= 0.9", r >= 0.9)

    # The fast paths: each hot path against what LevelDB itself costs for
    # the same work, with the bars docs/BENCHMARKS.md states.
    def fast(figure, value, bar, ok):
        row(f"fast path: {figure}", f"{value:.3f}", bar, ok)

    if have("BM_InsertThroughput/bigset", "BM_InsertThroughput/rawleveldb"):
        r = ips("BM_InsertThroughput/bigset") / ips("BM_InsertThroughput/rawleveldb")
        fast("insert bigset / raw", r, ">= 0.85", r >= 0.85)
    if have("BM_FullRead/bigset/1000000", "BM_FullRead/rawleveldb/1000000"):
        r = ips("BM_FullRead/bigset/1000000") / ips("BM_FullRead/rawleveldb/1000000")
        fast("full read bigset / raw", r, ">= 0.9", r >= 0.9)
    if have("BM_Contains/bigset/1000000", "BM_Get/rawleveldb/1000000"):
        r = time("BM_Contains/bigset/1000000") / time("BM_Get/rawleveldb/1000000")
        fast("contains time / raw get", r, "<= 1.15", r <= 1.15)
    # What a lookup by seek (a decomposed set's element keys carry their
    # dots) costs LevelDB itself, with an iterator kept or made per lookup.
    for name in ("BM_Seek/rawleveldb_kept/1000000", "BM_Seek/rawleveldb/1000000"):
        if have(name, "BM_Get/rawleveldb/1000000"):
            r = time(name) / time("BM_Get/rawleveldb/1000000")
            row(f"{name} time / raw get", f"{r:.3f}", "(report)", True)
    if have("BM_Contains/bigset/1000000", "BM_Seek/rawleveldb_kept/1000000"):
        r = time("BM_Contains/bigset/1000000") / time("BM_Seek/rawleveldb_kept/1000000")
        row("contains time / raw kept-iterator seek", f"{r:.3f}", "(report)", True)
    ceiling = "BM_HandOffCeiling/rawleveldb/1000000"
    for name, label in (("BM_HandOff/1000000", "hand-off"),
                        ("BM_AntiEntropy/full/1000000", "full exchange")):
        if have(name, ceiling):
            r = time(ceiling) / time(name)  # Real time: both ends' threads.
            fast(f"ceiling / {label} (real time)", r, ">= 0.7", r >= 0.7)
    if have("BM_ClusterInsert/n:3/w:2", "BM_ClusterInsertFloor/three_replicas"):
        r = ips("BM_ClusterInsert/n:3/w:2") / ips("BM_ClusterInsertFloor/three_replicas")
        fast("cluster insert / floor", r, ">= 0.9", r >= 0.9)

    # A benchmark that re-adds its previous run's elements measures seeks,
    # not inserts: each insert benchmark reports its presence seeks.
    for name in ("BM_ClusterInsert/n:3/w:2", "BM_ClusterInsertFloor/three_replicas"):
        if have(name) and "presence_seeks_per_insert" in runs[name]:
            v = runs[name]["presence_seeks_per_insert"]
            row(f"{name} presence seeks per insert", f"{v:.4f}", "<= 0.1 (new elements)", v <= 0.1)

    width = max(len(r[0]) for r in rows) if rows else 10
    print(f"\n{'figure':<{width}}  {'value':>16}  {'target':>22}  met")
    for figure, value, target, ok in rows:
        print(f"{figure:<{width}}  {value:>16}  {target:>22}  {ok}")


if __name__ == "__main__":
    main(sys.argv[1])
