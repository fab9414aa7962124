"""Shared code for the PyTorch baseline benchmarks (eager FP32 and dynamic INT8).

The model is tests/reference/reference_bert.BertModel (HF BertModel structure:
embeddings + encoder; pooler only with --pooler) with random weights.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import reference_bert as rb  # noqa: E402


def parse_args(description: str, argv=None, add_extra=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    if add_extra is not None:
        add_extra(ap)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--intermediate", type=int, default=1536)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=50, help="timed iterations")
    ap.add_argument("--warmup", type=int, default=10, help="untimed warm-up iterations")
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--act", default="gelu", choices=["gelu", "gelu_new", "relu"])
    ap.add_argument("--pooler", action="store_true", help="include the pooler (dense+tanh on [CLS])")
    ap.add_argument("--pad-fraction", type=float, default=0.0,
                    help="fraction of each sequence set to padding (attention_mask 0); default none")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print one JSON line instead of text")
    a = ap.parse_args(argv)
    if a.hidden % a.heads:
        ap.error("--hidden must be divisible by --heads")
    if a.seq > 512:
        ap.error("--seq must be <= 512 (max_position_embeddings)")
    return a


def setup_threads(threads: int) -> None:
    # Inter-op threads must be set before any parallel work; intra-op = --threads.
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.set_num_threads(threads)
    if torch.get_num_threads() != threads:
        raise SystemExit(f"torch.set_num_threads({threads}) not honoured: get_num_threads()={torch.get_num_threads()}")


def build_model(a: argparse.Namespace) -> torch.nn.Module:
    torch.manual_seed(a.seed)
    cfg = rb.bert_config(a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                         intermediate_size=a.intermediate, max_position_embeddings=512, hidden_act=a.act)
    sd = rb.random_bert_state_dict(cfg, torch.Generator().manual_seed(a.seed), pooler=a.pooler)
    return rb.build_module(cfg, sd, pooler=a.pooler)


def make_inputs(a: argparse.Namespace):
    g = torch.Generator().manual_seed(a.seed + 1)
    ids = torch.randint(1000, a.vocab, (a.batch, a.seq), generator=g)
    ids[:, 0] = 101
    ids[:, -1] = 102
    mask = torch.ones(a.batch, a.seq, dtype=torch.long)
    n_pad = int(round(a.seq * a.pad_fraction))
    if n_pad:
        mask[:, a.seq - n_pad:] = 0
        ids[:, a.seq - n_pad:] = 0
    tt = torch.zeros(a.batch, a.seq, dtype=torch.long)
    return ids, mask, tt


def time_model(model, inputs, a: argparse.Namespace):
    ids, mask, tt = inputs
    with torch.inference_mode():
        for _ in range(a.warmup):
            model(ids, mask, tt)
        times = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            out = model(ids, mask, tt)
            times.append(time.perf_counter() - t0)
    ms = np.array(times) * 1000.0
    return out, {
        "median_ms": float(np.median(ms)),
        "p10_ms": float(np.percentile(ms, 10)),
        "p90_ms": float(np.percentile(ms, 90)),
        "mean_ms": float(ms.mean()),
        "min_ms": float(ms.min()),
        "seq_per_s": float(a.batch / (np.median(ms) / 1000.0)),
    }


def report(name: str, a: argparse.Namespace, stats: dict, extra: dict) -> None:
    rec = {
        "benchmark": name,
        "layers": a.layers, "hidden": a.hidden, "heads": a.heads, "intermediate": a.intermediate,
        "batch": a.batch, "seq": a.seq, "threads": a.threads, "torch_threads": torch.get_num_threads(),
        "repeats": a.repeats, "warmup": a.warmup, "pooler": a.pooler, "pad_fraction": a.pad_fraction,
        "act": a.act,
    }
    rec.update({k: round(v, 4) for k, v in stats.items()})
    rec.update(extra)
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else -1.0
    ncpu = os.cpu_count() or 0
    rec.update({"torch": torch.__version__, "cpu": platform.processor() or platform.machine(),
                "mkldnn": torch.backends.mkldnn.is_available(), "cpu_count": ncpu,
                "loadavg_1m": round(load1, 2), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")})
    if ncpu and load1 > max(ncpu - a.threads, 0) + 0.5:
        # Other processes compete for the cores: with the default (active) OpenMP wait policy a
        # descheduled worker stalls every barrier, so multi-threaded medians can be 10-20x off.
        print(f"warning: 1-min load average {load1:.1f} on {ncpu} CPUs; timings with "
              f"{a.threads} threads are unreliable (try a quiet machine or OMP_WAIT_POLICY=PASSIVE)",
              file=sys.stderr, flush=True)
    if a.json:
        print(json.dumps(rec), flush=True)
        return
    print(f"{name}: L={a.layers} H={a.hidden} A={a.heads} I={a.intermediate} "
          f"batch={a.batch} seq={a.seq} threads={torch.get_num_threads()} repeats={a.repeats} warmup={a.warmup}")
    for k, v in extra.items():
        print(f"  {k}: {v}")
    print(f"  latency ms: median {stats['median_ms']:.3f}  p10 {stats['p10_ms']:.3f}  p90 {stats['p90_ms']:.3f}  "
          f"(mean {stats['mean_ms']:.3f}, min {stats['min_ms']:.3f})")
    print(f"  throughput: {stats['seq_per_s']:.1f} sequences/s")
