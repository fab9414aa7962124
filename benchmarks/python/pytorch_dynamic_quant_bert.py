#!/usr/bin/env python3
"""PyTorch dynamic INT8 quantization baseline for a BERT encoder (random weights).

  /usr/bin/python3 benchmarks/python/pytorch_dynamic_quant_bert.py --layers 6 --hidden 384 --heads 12 \
      --intermediate 1536 --batch 1 --seq 32 --threads 2 --repeats 50 [--json]

Same model/flags/timing as pytorch_eager_bert.py, after
torch.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8) with
torch.backends.quantized.engine = 'onednn' if supported, else 'fbgemm' (else the
first other supported engine). Also reports the accuracy of the INT8 model
against the FP32 model on the timed input (max abs diff / mean cosine of
last_hidden_state rows) and the FP32 median for the same run if --compare-fp32.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _bench_common as bc  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def pick_engine() -> str:
    engines = torch.backends.quantized.supported_engines
    for e in ("onednn", "fbgemm"):
        if e in engines:
            return e
    others = [e for e in engines if e != "none"]
    if not others:
        raise SystemExit(f"no quantized engine available (supported_engines={engines})")
    return others[0]


def main(argv=None) -> int:
    a = bc.parse_args(__doc__, argv, lambda ap: ap.add_argument(
        "--compare-fp32", action="store_true", help="also time the FP32 model and report the speed-up"))
    compare = a.compare_fp32
    bc.setup_threads(a.threads)
    engine = pick_engine()
    torch.backends.quantized.engine = engine
    if not a.json:
        print(f"quantized engine: {engine} (supported: {torch.backends.quantized.supported_engines})")

    fp32 = bc.build_model(a)
    inputs = bc.make_inputs(a)
    qmodel = torch.quantization.quantize_dynamic(fp32, {nn.Linear}, dtype=torch.qint8)
    n_q = sum(1 for m in qmodel.modules() if type(m).__name__ == "Linear" and "quantized" in type(m).__module__)

    out_q, stats = bc.time_model(qmodel, inputs, a)
    extra = {"quant_engine": engine, "quantized_linear_modules": n_q}
    with torch.inference_mode():
        ref = fp32(*inputs)[0]
    hq = out_q[0]
    extra["max_abs_diff_vs_fp32"] = round(float((hq - ref).abs().max()), 6)
    extra["mean_cosine_vs_fp32"] = round(float(torch.nn.functional.cosine_similarity(
        hq.reshape(-1, hq.shape[-1]), ref.reshape(-1, ref.shape[-1]), dim=-1).mean()), 6)
    if compare:
        _, s32 = bc.time_model(fp32, inputs, a)
        extra["fp32_median_ms"] = round(s32["median_ms"], 4)
        extra["speedup_vs_fp32"] = round(s32["median_ms"] / stats["median_ms"], 3)
    bc.report("pytorch_dynamic_int8", a, stats, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
