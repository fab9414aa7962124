#!/usr/bin/env python3
"""Runs the transformer runtime side by side with PyTorch eager on the same
shapes and thread count, and prints the table of docs/model-performance.md.

    /usr/bin/python3 benchmarks/compare_pytorch.py --bench build/benchmarks/rapidqa-bench [--threads 2]

rapidqa: BM_TransformerForward and BM_SgemmPeak from rapidqa-bench (one
process). PyTorch: benchmarks/python/pytorch_eager_bert.py, the same BERT
architecture in eager mode under torch.inference_mode, with the same thread
count; it is run with both OpenMP wait policies and the faster is kept, so
the baseline is PyTorch at its best on this machine.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = {"bert-base": (0, 12, 768, 12, 3072), "minilm-l6": (1, 6, 384, 12, 1536)}
BATCHES = (1, 8, 32)
SEQS = (32, 128)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def run_rapidqa(bench, threads, min_time):
    out = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    regex = f"BM_TransformerForward/.*/threads:{threads}/|BM_SgemmPeak"
    print(f"[compare] running {bench} --benchmark_filter='{regex}'", file=sys.stderr, flush=True)
    subprocess.run([bench, f"--benchmark_filter={regex}", f"--benchmark_min_time={min_time}",
                    f"--benchmark_out={out}", "--benchmark_out_format=json"], check=True,
                   stdout=subprocess.DEVNULL)
    with open(out) as f:
        data = json.load(f)
    os.unlink(out)
    forward, peak = {}, 0.0
    for b in data["benchmarks"]:
        name = b["name"]
        if name.startswith("BM_SgemmPeak"):
            peak = max(peak, b["GFLOPs"])
            continue
        parts = dict(p.split(":") for p in name.split("/")[1:] if ":" in p)
        key = (int(parts["shape"]), int(parts["batch"]), int(parts["seq"]))
        forward[key] = {"ms": b["real_time"], "gflops": b["GFLOPs"], "seq_per_s": b["seq_per_s"]}
    return forward, peak


def run_pytorch(shape, batch, seq, threads):
    _, layers, hidden, heads, inter = shape
    script = os.path.join(HERE, "python", "pytorch_eager_bert.py")
    repeats = max(5, min(50, int(400 / (batch * seq / 32 * layers * hidden / 768))))
    best = None
    for policy in ("ACTIVE", "PASSIVE"):
        env = dict(os.environ, OMP_WAIT_POLICY=policy)
        cmd = [sys.executable, script, "--layers", str(layers), "--hidden", str(hidden), "--heads", str(heads),
               "--intermediate", str(inter), "--batch", str(batch), "--seq", str(seq), "--threads", str(threads),
               "--repeats", str(repeats), "--warmup", "3", "--json"]
        res = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
        line = [l for l in res.stdout.splitlines() if l.startswith("{")][-1]
        r = json.loads(line)
        ms = r.get("median_ms")
        if best is None or ms < best:
            best = ms
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default="build/benchmarks/rapidqa-bench")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--json-out", help="also write the raw numbers here")
    a = ap.parse_args()
    forward, peak = run_rapidqa(a.bench, a.threads, a.min_time)
    rows = []
    for name, shape in SHAPES.items():
        for batch in BATCHES:
            for seq in SEQS:
                r = forward[(shape[0], batch, seq)]
                print(f"[compare] PyTorch eager {name} batch {batch} seq {seq}", file=sys.stderr, flush=True)
                pt = run_pytorch(shape, batch, seq, a.threads)
                rows.append({"shape": name, "batch": batch, "seq": seq, "rapidqa_ms": r["ms"], "pytorch_ms": pt,
                             "speedup": pt / r["ms"], "seq_per_s": r["seq_per_s"], "gflops": r["gflops"],
                             "peak_fraction": r["gflops"] / peak})
    print(f"Machine: {cpu_name()}, {os.cpu_count()} cores, {a.threads} threads for both; "
          f"sgemm peak measured in this run: {peak:.0f} GFLOP/s\n")
    print("| shape | batch | seq | rapidqa ms | PyTorch eager ms | speedup | rapidqa seq/s | GFLOP/s | % of sgemm peak |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['shape']} | {r['batch']} | {r['seq']} | {r['rapidqa_ms']:.1f} | {r['pytorch_ms']:.1f} | "
              f"{r['speedup']:.2f}x | {r['seq_per_s']:.1f} | {r['gflops']:.0f} | {100 * r['peak_fraction']:.0f}% |")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"peak_gflops": peak, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
