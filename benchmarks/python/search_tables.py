#!/usr/bin/env python3
"""Prints the tables of docs/search-performance.md from a run of
benchmarks/run_search_tables.sh: search against FAISS (with recall), the
AVX2 path against the CPU's best kernels, and QAEngine::ask on each path.

Usage: search_tables.py OUT_DIR
"""
import glob
import json
import os
import re
import statistics
import sys


def load(path):
    """Benchmark name -> list of its per-repetition result dicts."""
    runs = {}
    if not os.path.exists(path):
        return runs
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type", "iteration") == "iteration":
            runs.setdefault(b["run_name"], []).append(b)
    return runs


def rounds(out, isa, part="small"):
    """The interleaved rounds' results, merged: name -> list over rounds."""
    merged = {}
    for path in sorted(glob.glob(os.path.join(out, "%s.*.%s.json" % (part, isa)))):
        for name, results in load(path).items():
            merged.setdefault(name, []).extend(results)
    return merged


def fmt(value, digits=None):
    if value is None:
        return "–"
    if digits is None:
        digits = 0 if value >= 100 else 1 if value >= 10 else 2
    return f"{value:,.{digits}f}"


def time_us(results):
    return statistics.median(r["real_time"] for r in results) if results else None


def counter(results, key):
    values = [r[key] for r in results or [] if key in r]
    return statistics.median(values) if values else None


def table(title, columns, rows, first_column_numeric=False):
    """Prints a titled Markdown table, its columns right-aligned but the first
    (unless that one is numeric too)."""
    print(f"\n{title}\n")
    print("| " + " | ".join(columns) + " |")
    print("|" + ("---:|" if first_column_numeric else "---|") + "---:|" * (len(columns) - 1))
    for cells in rows:
        print("| " + " | ".join(cells) + " |")


def micro(seconds):
    return seconds * 1e6 if seconds is not None else None


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) == 2 else 2
    out = sys.argv[1]
    machine = os.path.join(out, "machine.txt")
    if os.path.exists(machine):
        print(open(machine).read().strip())

    index = load(os.path.join(out, "index.native.json"))
    pattern = re.compile(r"BM_IndexSearch/kind:(\d)/vectors:(\d+)/efSearch:(\d+)")
    found = {}
    for name, results in index.items():
        m = pattern.fullmatch(name)
        if m:
            found[tuple(int(g) for g in m.groups())] = results
    sizes = sorted({k[1] for k in found})

    rows = []
    for n in sizes:
        ours, theirs = found.get((0, n, 0)), found.get((2, n, 0))
        if ours:
            ratio = time_us(theirs) / time_us(ours) if theirs else None
            rows.append((f"{n:,}", fmt(time_us(ours)), fmt(counter(ours, "recall@1"), 3), fmt(time_us(theirs)),
                         fmt(counter(theirs, "recall@1"), 3), f"{fmt(ratio, 1)}x"))
    table("Exact search (k = 12), one query per call:",
          ("vectors", "rapidqa µs", "recall@1", "FAISS IndexFlatIP µs", "recall@1", "FAISS / rapidqa"), rows,
          first_column_numeric=True)

    rows = []
    for n in sizes:
        for ef in (32, 64, 128, 256):
            ours, same, own = found.get((1, n, ef)), found.get((4, n, ef)), found.get((3, n, ef))
            if ours:
                ratio = time_us(same) / time_us(ours) if same else None
                rows.append((f"{n:,}", str(ef), fmt(time_us(ours)), fmt(counter(ours, "recall@1"), 3),
                             fmt(time_us(same)), fmt(counter(same, "recall@1"), 3), f"{fmt(ratio, 1)}x",
                             fmt(time_us(own)), fmt(counter(own, "recall@1"), 3)))
    table("HNSW (M 32, efConstruction 80), one query per call; FAISS's search over rapidqa's graph, "
          "and over its own build where run:",
          ("vectors", "efSearch", "rapidqa µs", "recall@1", "FAISS, same graph µs", "recall@1", "FAISS / rapidqa",
           "FAISS, own graph µs", "recall@1"), rows, first_column_numeric=True)

    batch = {k: v for k, v in index.items() if k.startswith("BM_IndexSearchBatch/")}
    if batch:
        # A rate counter inverted: seconds per query in the JSON.
        table("Several queries per call (µs per query):", ("benchmark", "µs per query"),
              ((name, fmt(micro(counter(results, "per_query_us")))) for name, results in sorted(batch.items())))

    # The AVX2 path beside the best kernels.
    native_small, avx2_small = rounds(out, "native"), rounds(out, "AVX2")
    native_index, avx2_index = rounds(out, "native", "kernels"), rounds(out, "AVX2", "kernels")
    ask_native = load(os.path.join(out, "ask.native.json"))
    rows = []

    def row(label, best, avx2):
        ratio = avx2 / best if best and avx2 else None
        rows.append((label, fmt(best), fmt(avx2), fmt(ratio, 2)))

    for n, kind, ef in ((10000, 0, 0), (100000, 0, 0), (10000, 1, 64), (10000, 1, 256), (100000, 1, 64),
                        (100000, 1, 256)):
        name = f"BM_IndexSearch/kind:{kind}/vectors:{n}/efSearch:{ef}"
        label = f"{'exact' if kind == 0 else 'HNSW efSearch %d' % ef}, {n:,} vectors, µs"
        row(label, time_us(native_index.get(name)), time_us(avx2_index.get(name)))
    for what in ("Hit", "Miss"):
        name = f"BM_SemanticCacheLookup{what}/1000"
        row(f"semantic-cache lookup, 1,000 cached, {what.lower()} µs", time_us(native_small.get(name)),
            time_us(avx2_small.get(name)))
    for n in (1000, 10000):
        name = f"BM_AskSemanticCacheHit/{n}/iterations:10000"
        row(f"ask: semantic-cache hit over {n:,} entries, p50 µs", counter(native_small.get(name, []), "p50_us"),
            counter(avx2_small.get(name, []), "p50_us"))
    for n in (1000, 10000):
        name = f"BM_AskMiss/{n}/iterations:10000"
        row(f"ask: miss over {n:,} entries, p99 µs", counter(native_small.get(name, []), "p99_us"),
            counter(avx2_small.get(name, []), "p99_us"))
    table("The AVX2 path (medians over three interleaved rounds of each):",
          ("measurement", "best kernels", "AVX2", "AVX2 / best"), rows)

    rows = []
    for label, prefix in (("result-cache hit", "BM_AskResultCacheHit"),
                          ("semantic-cache hit (1,000 cached questions)", "BM_AskSemanticCacheHit"),
                          ("miss: encode + semantic lookup + retrieval", "BM_AskMiss")):
        for n in (1000, 10000, 100000):
            name = f"{prefix}/{n}/iterations:10000"
            results = native_small.get(name) or ask_native.get(name)
            if not results:
                continue
            percentiles = ("p50_us", "p95_us", "p99_us", "mean_us")
            rows.append((label, f"{n:,}") + tuple(fmt(counter(results, k)) for k in percentiles))
    table("Asking, each path (µs; over 1k and 10k entries the median of the three rounds' percentiles):",
          ("path", "entries", "p50", "p95", "p99", "mean"), rows)

    stages = load(os.path.join(out, "stages.native.json"))
    if stages:
        table("Stages (µs per call):", ("benchmark", "µs"),
              ((name, fmt(time_us(results))) for name, results in sorted(stages.items())))

    scale = load(os.path.join(out, "semantic-scale.native.json"))
    if scale:
        table("The semantic cache's HNSW index, 100k question-shaped vectors:",
              ("benchmark", "efSearch", "p50 µs", "p99 µs", "recall@1"),
              ((name, fmt(counter(results, "ef_search"), 0), fmt(counter(results, "p50_us")),
                fmt(counter(results, "p99_us")), fmt(counter(results, "recall_at_1"), 3))
               for name, results in sorted(scale.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
