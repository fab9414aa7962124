#!/usr/bin/env python3
"""PyTorch eager FP32 baseline for a BERT encoder (random weights).

  /usr/bin/python3 benchmarks/python/pytorch_eager_bert.py --layers 6 --hidden 384 --heads 12 \
      --intermediate 1536 --batch 1 --seq 32 --threads 2 --repeats 50 [--json]

Times model(input_ids, attention_mask, token_type_ids) under torch.inference_mode()
in eval mode after --warmup untimed runs; prints median/p10/p90 latency (ms) and
sequences/s (batch / median latency). The model is the HF-structured BertModel
from tests/reference/reference_bert.py (validated against the reference forward
by tests/reference/check_reference.py).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _bench_common as bc  # noqa: E402


def main(argv=None) -> int:
    a = bc.parse_args(__doc__, argv)
    bc.setup_threads(a.threads)
    model = bc.build_model(a)
    _, stats = bc.time_model(model, bc.make_inputs(a), a)
    bc.report("pytorch_eager_fp32", a, stats, {})
    return 0


if __name__ == "__main__":
    sys.exit(main())
