#!/usr/bin/env python3
"""The Quantizer's tables (docs/model-performance.md): rapidqa FP32 and INT8
against PyTorch FP32 and PyTorch's dynamic quantization (quantize_dynamic,
onednn engine), on the same random BERT-base and MiniLM-L6 weights, in one
run.

    /usr/bin/python3 benchmarks/compare_quantized.py --bench build/benchmarks/rapidqa-bench [--threads 2]

The weights are written once (safetensors) and read by both sides:
rapidqa-bench through RAPIDQA_BENCH_MODELS (BM_QuantizedForward,
BM_QuantizedFidelity), PyTorch through tests/reference/reference_bert.py.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "python"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import reference_bert as rb  # noqa: E402
from compare_pytorch import cpu_name  # noqa: E402

SHAPES = {"bert-base": (0, 12, 768, 12, 3072), "minilm-l6": (1, 6, 384, 12, 1536)}
CASES = [("bert-base", 8, 128), ("minilm-l6", 1, 32), ("minilm-l6", 8, 128)]
VARIANTS = {0: "FP32", 1: "INT8, practice table", 2: "INT8 auto", 3: "INT8 auto, static", 4: "INT8 every layer"}


def write_models(root):
    modules = {}
    for name, (_, layers, hidden, heads, inter) in SHAPES.items():
        cfg = rb.bert_config(30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                             intermediate_size=inter, max_position_embeddings=512)
        sd = rb.random_bert_state_dict(cfg, torch.Generator().manual_seed(0), pooler=False)
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        rb.write_safetensors(os.path.join(d, "model.safetensors"), sd)
        modules[name] = rb.build_module(cfg, sd, pooler=False).eval()
    return modules


def time_torch(model, batch, seq, repeats):
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(1000, 29000, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    tt = torch.zeros(batch, seq, dtype=torch.long)
    with torch.inference_mode():
        for _ in range(3):
            model(ids, mask, tt)
        times = []
        deadline = time.perf_counter() + 2.0
        while len(times) < repeats or time.perf_counter() < deadline:
            t0 = time.perf_counter()
            model(ids, mask, tt)
            times.append(time.perf_counter() - t0)
            if len(times) >= 5 * repeats:
                break
    return float(np.median(times) * 1000.0)


def run_bench(bench, models_dir, threads):
    out = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    env = dict(os.environ, RAPIDQA_BENCH_MODELS=models_dir)
    regex = "BM_QuantizedForward|BM_QuantizedFidelity"
    print(f"[compare] {bench} --benchmark_filter='{regex}'", file=sys.stderr, flush=True)
    subprocess.run([bench, f"--benchmark_filter={regex}", f"--benchmark_out={out}", "--benchmark_out_format=json"],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    with open(out) as f:
        data = json.load(f)
    os.unlink(out)
    forward, fidelity = {}, {}
    for b in data["benchmarks"]:
        parts = dict(p.split(":") for p in b["name"].split("/")[1:] if ":" in p)
        if b["name"].startswith("BM_QuantizedForward"):
            key = (int(parts["shape"]), int(parts["batch"]), int(parts["seq"]), int(parts["variant"]))
            forward[key] = b
        else:
            fidelity[(int(parts["shape"]), int(parts["variant"]))] = b
    return forward, fidelity


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=20)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.backends.quantized.engine = "onednn"
    with tempfile.TemporaryDirectory() as root:
        modules = write_models(root)
        forward, fidelity = run_bench(a.bench, root, a.threads)
        torch_ms = {}
        for name, batch, seq in CASES:
            print(f"[compare] PyTorch {name} b{batch} s{seq}", file=sys.stderr, flush=True)
            fp32 = modules[name]
            q = torch.ao.quantization.quantize_dynamic(fp32, {torch.nn.Linear}, dtype=torch.qint8)
            torch_ms[(name, batch, seq)] = (time_torch(fp32, batch, seq, a.repeats), time_torch(q, batch, seq, a.repeats))
    print(f"Machine: {cpu_name()}, {os.cpu_count()} vCPUs, {a.threads} threads; torch {torch.__version__}, "
          f"quantized engine {torch.backends.quantized.engine}.\n")
    print("| shape | batch x seq | variant | rapidqa ms | vs rapidqa FP32 | weights MB (of FP32) | "
          "PyTorch FP32 ms | PyTorch quantize_dynamic ms | PyTorch speed-up |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, batch, seq in CASES:
        index = SHAPES[name][0]
        base = forward.get((index, batch, seq, 0))
        pt_fp32, pt_q = torch_ms[(name, batch, seq)]
        for v, label in VARIANTS.items():
            b = forward.get((index, batch, seq, v))
            if not b:
                continue
            speed = base["real_time"] / b["real_time"]
            pt = (f"{pt_fp32:.1f} | {pt_q:.1f} | {pt_fp32 / pt_q:.2f}x" if v == 0 else " | | ")
            print(f"| {name} | {batch} x {seq} | {label} | {b['real_time']:.2f} | {speed:.2f}x | "
                  f"{b['weight_MB']:.0f} ({100 * b['weight_ratio']:.0f}%) | {pt} |")
    print("\n| shape | variant | cosine to FP32 (mean / min) | top-1 agreement | top-1 FP32 / INT8 |")
    print("|---|---|---|---|---|")
    for (index, v), b in sorted(fidelity.items()):
        name = [n for n, s in SHAPES.items() if s[0] == index][0]
        print(f"| {name} | {VARIANTS[v]} | {b['cosine_mean']:.4f} / {b['cosine_min']:.4f} | "
              f"{100 * b['top1_agreement']:.1f}% | {100 * b['fp32_top1']:.1f}% / {100 * b['int8_top1']:.1f}% |")


if __name__ == "__main__":
    main()
