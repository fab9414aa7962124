#!/usr/bin/env python3
"""Write a MiniLM-L6-shaped BERT encoder with random (seeded) weights for rapidqa-load.

Usage:  python3 benchmarks/python/make_load_model.py OUTDIR [--kb FILE ...] [--seed N]

The shape is all-MiniLM-L6-v2's (6 layers, hidden 384, 12 heads, intermediate
1536, 512 positions); the WordPiece vocabulary is built from the words and
characters of the knowledge files given (plus letters and continuation
pieces), so the questions tokenise to realistic lengths. Weights are random:
the load tool measures speed, not answer quality. Only torch and the
standard library are needed (the safetensors writer is the reference's own).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))

import torch  # noqa: E402

import reference_bert as rb  # noqa: E402

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def vocabulary(kb_files):
    words, chars = set(), set()
    for path in kb_files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                entry = json.loads(line)
                for text in [entry.get("question", "")] + entry.get("alternates", []):
                    for w in re.findall(r"[a-z0-9]+", text.lower()):
                        words.add(w)
                    for c in text:
                        if ord(c) > 0x2e80:
                            chars.add(c)
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)]
    punct = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["？", "，", "。", "！", "："]
    pieces = ["##" + c for c in letters]
    out = SPECIALS + punct + letters + sorted(words - set(letters)) + pieces + sorted(chars - set(punct))
    return list(dict.fromkeys(out))  # each token once, first place kept


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--kb", action="append", default=[], help="knowledge JSONL whose words form the vocabulary")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    vocab = vocabulary(args.kb)
    cfg = rb.bert_config(len(vocab), hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                         intermediate_size=1536, max_position_embeddings=512)
    sd = rb.random_bert_state_dict(cfg, torch.Generator().manual_seed(args.seed), pooler=False)
    os.makedirs(args.outdir, exist_ok=True)
    with open(os.path.join(args.outdir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(args.outdir, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    rb.write_safetensors(os.path.join(args.outdir, "model.safetensors"), sd, "F32")
    print(f"make_load_model: {args.outdir}: MiniLM-L6 shape, vocabulary of {len(vocab)} tokens")


if __name__ == "__main__":
    main()
