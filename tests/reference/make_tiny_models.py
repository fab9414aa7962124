#!/usr/bin/env python3
"""Build tiny BERT-family models with random (seeded) weights + reference outputs.

Usage:  python3 tests/reference/make_tiny_models.py OUTDIR [--seed N] [--no-check]

Writes Hugging Face style model directories under OUTDIR and OUTDIR/reference.json
with outputs of the independent pure-PyTorch reference forward in
tests/reference/reference_bert.py. At the end it runs check_reference.py on OUTDIR
(re-reads every file with an independent code path) unless --no-check is given.

Only torch (1.13), numpy and the standard library are needed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# TorchScript serialisation orders some class constants by Python set iteration;
# pin the hash seed so model.pt is byte-identical across runs (re-exec before torch loads).
if __name__ == "__main__" and os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import torch  # noqa: E402

import reference_bert as rb  # noqa: E402

FORMAT_VERSION = 1

# --------------------------------------------------------------------------
# Vocabulary (shared by every model)
# --------------------------------------------------------------------------

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["？", "，", "。", "！", "："]
DIGITS = list("0123456789")
WORDS = [
    "the", "a", "an", "and", "or", "is", "are", "was", "be", "to", "of", "in", "on", "for",
    "with", "it", "this", "that", "you", "your", "my", "i", "we", "what", "where", "when",
    "how", "why", "who", "do", "does", "can", "will", "not", "no", "yes",
    "reset", "pass", "password", "account", "login", "order", "ship", "shipped", "arrive",
    "soon", "yesterday", "today", "phone", "email", "help", "cafe", "na",
]
SUFFIXES = ["##word", "##phone", "##ped", "##ive", "##s", "##ed", "##ing", "##er", "##ly"]
LETTERS = list("bcdefghjklmnopqrstuvwxyz")          # single letters ("a", "i" are words above)
CONT_LETTERS = ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
# Chinese characters; "哪" is deliberately absent so the mixed sentence yields [UNK].
CJK = list("如何重置密码我的订单在里是什么你好请问账户登录")


def build_vocab():
    toks = SPECIALS + PUNCT + DIGITS + WORDS + SUFFIXES + LETTERS + CONT_LETTERS + CJK
    # "password" is a whole word above; drop it so WordPiece has to produce pass ##word.
    toks = [t for t in toks if t != "password"]
    seen, out = set(), []
    for t in toks:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


TOKENIZE_CASES = [
    {"name": "english", "text": "How do I reset my password?"},
    {"name": "chinese", "text": "如何重置密码？"},
    {"name": "mixed", "text": "我的iPhone订单在哪里?"},
    {"name": "accented", "text": "Café naïve"},
    {"name": "qa_pair", "text": "Where is my order?",
     "text_pair": "Your order shipped yesterday and will arrive soon."},
]


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def fl(x):
    """float32 -> shortest decimal that round-trips to the same float32 (9 sig. digits)."""
    if isinstance(x, list):
        return [fl(v) for v in x]
    return float(f"{x:.9g}")


def pad_batch(seqs, type_seqs=None):
    L = max(len(s) for s in seqs)
    ids = [s + [0] * (L - len(s)) for s in seqs]
    mask = [[1] * len(s) + [0] * (L - len(s)) for s in seqs]
    if type_seqs is None:
        type_seqs = [[0] * len(s) for s in seqs]
    tt = [t + [0] * (L - len(t)) for t in type_seqs]
    return ids, mask, tt


def make_cases(tok, vocab_size, seed, max_pos):
    """Fixed list of model input cases built from the tokenized sentences."""
    e, zh, mixed, acc, pair = (tok[c["name"]] for c in TOKENIZE_CASES)
    cases = []

    ids, m, tt = pad_batch([e["input_ids"], zh["input_ids"]])
    cases.append({"name": "batch2_padded", "texts": [TOKENIZE_CASES[0]["text"], TOKENIZE_CASES[1]["text"]],
                  "input_ids": ids, "attention_mask": m, "token_type_ids": tt})

    ids, m, tt = pad_batch([mixed["input_ids"]])
    cases.append({"name": "single", "texts": [TOKENIZE_CASES[2]["text"]],
                  "input_ids": ids, "attention_mask": m, "token_type_ids": tt})

    ids, m, tt = pad_batch([pair["input_ids"]], [pair["token_type_ids"]])
    cases.append({"name": "pair", "texts": [[TOKENIZE_CASES[4]["text"], TOKENIZE_CASES[4]["text_pair"]]],
                  "input_ids": ids, "attention_mask": m, "token_type_ids": tt})

    ids, m, tt = pad_batch([acc["input_ids"], pair["input_ids"], e["input_ids"]],
                           [acc["token_type_ids"], pair["token_type_ids"], e["token_type_ids"]])
    cases.append({"name": "batch3_pair_padded",
                  "texts": [TOKENIZE_CASES[3]["text"], [TOKENIZE_CASES[4]["text"], TOKENIZE_CASES[4]["text_pair"]],
                            TOKENIZE_CASES[0]["text"]],
                  "input_ids": ids, "attention_mask": m, "token_type_ids": tt})

    # Full max_position_embeddings length (row 0) next to a short heavily padded row (row 1).
    g = torch.Generator().manual_seed(seed + 999)
    body = torch.randint(5, vocab_size, (max_pos - 2,), generator=g).tolist()
    row0 = [2] + body + [3]
    row1 = [2] + body[:3] + [3]
    L = len(row0)
    tt0 = [0] * (L // 2) + [1] * (L - L // 2)
    ids, m, tt = pad_batch([row0, row1], [tt0, [0] * len(row1)])
    cases.append({"name": "max_length_and_short", "texts": None,
                  "input_ids": ids, "attention_mask": m, "token_type_ids": tt})
    return cases


def run_cases(sd, cfg, cases, model_type):
    out_cases = []
    for c in cases:
        ids = torch.tensor(c["input_ids"], dtype=torch.long)
        m = torch.tensor(c["attention_mask"], dtype=torch.long)
        tt = torch.tensor(c["token_type_ids"], dtype=torch.long)
        with torch.no_grad():
            o = rb.model_forward(sd, cfg, ids, m, tt)
        rc = dict(c)
        for k in ("last_hidden_state", "mean_pooled", "cls_pooled", "pooler_output", "start_logits", "end_logits"):
            if k in o:
                rc[k] = fl(o[k].tolist())
        out_cases.append(rc)
    return out_cases


_NUM_LIST = re.compile(r"\[\s+([^\[\]{}\"]*?)\s+\]")


def write_json(path, obj):
    """Pretty JSON (indent 2) with innermost lists of numbers kept on one line."""
    text = json.dumps(obj, ensure_ascii=False, indent=2)
    text = _NUM_LIST.sub(lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")


def write_vocab(path, vocab):
    with open(path, "w", encoding="utf-8") as f:
        for t in vocab:
            f.write(t + "\n")


def prefixed(sd, prefix):
    return {prefix + k: v for k, v in sd.items()}


# --------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--no-check", action="store_true", help="skip the end-to-end self-check")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    torch.set_default_dtype(torch.float32)
    out = os.path.abspath(args.outdir)
    os.makedirs(out, exist_ok=True)
    print(f"[make_tiny_models] torch {torch.__version__}, seed {args.seed}, out {out}")

    vocab_list = build_vocab()
    vocab = {t: i for i, t in enumerate(vocab_list)}
    V = len(vocab_list)
    print(f"[make_tiny_models] vocab: {V} tokens")

    # ---- tokenizer reference
    tok = {}
    tok_section = {"do_lower_case": True, "vocab_file": "bert-tiny/vocab.txt",
                   "special_ids": {t: vocab[t] for t in SPECIALS}, "cases": []}
    for c in TOKENIZE_CASES:
        enc = rb.encode(vocab, c["text"], c.get("text_pair"))
        tok[c["name"]] = enc
        entry = {"name": c["name"], "text": c["text"]}
        if "text_pair" in c:
            entry["text_pair"] = c["text_pair"]
        entry.update(enc)
        tok_section["cases"].append(entry)
        print(f"  tokenize {c['name']:9s} -> {' '.join(enc['tokens'])}")

    bert_cfg = rb.bert_config(V)
    H = bert_cfg["hidden_size"]
    LINEAR_STD = 0.15  # see reference_bert.random_bert_state_dict docstring

    # ---- weights (independent generator streams per weight set)
    base = rb.random_bert_state_dict(bert_cfg, torch.Generator().manual_seed(args.seed), pooler=True,
                                     linear_std=LINEAR_STD)
    g_qa = torch.Generator().manual_seed(args.seed + 1)
    qa_body = rb.random_bert_state_dict(bert_cfg, g_qa, pooler=False, linear_std=LINEAR_STD)
    qa_sd = prefixed(qa_body, "bert.")
    qa_sd["qa_outputs.weight"] = torch.randn(2, H, generator=g_qa) * LINEAR_STD
    qa_sd["qa_outputs.bias"] = torch.randn(2, generator=g_qa) * 0.02
    dcfg = rb.distilbert_config(V)
    dsd = rb.random_distilbert_state_dict(dcfg, torch.Generator().manual_seed(args.seed + 2),
                                          linear_std=LINEAR_STD)

    cases = make_cases(tok, V, args.seed, bert_cfg["max_position_embeddings"])

    # (dirname, config, state dict as stored, stored dtype, file kind, notes)
    models = []

    def add(name, cfg, ref_sd, files_sd, st_dtype, kind="safetensors", notes=""):
        models.append((name, cfg, ref_sd, files_sd, st_dtype, kind, notes))

    add("bert-tiny", bert_cfg, base, base, "F32")
    mlm_cfg = dict(bert_cfg, architectures=["BertForMaskedLM"])
    pre = prefixed(base, "bert.")
    pre["cls.predictions.bias"] = torch.randn(V, generator=torch.Generator().manual_seed(args.seed + 3)) * 0.02
    add("bert-tiny-prefixed", mlm_cfg, base, pre, "F32",
        notes="same weights as bert-tiny, names prefixed 'bert.', extra unused 'cls.predictions.bias'")
    add("bert-tiny-f16", dict(bert_cfg, torch_dtype="float16"), rb.round_trip(base, torch.float16), base, "F16",
        notes="bert-tiny weights stored as F16; reference uses F16-rounded weights computed in float32")
    add("bert-tiny-bf16", dict(bert_cfg, torch_dtype="bfloat16"), rb.round_trip(base, torch.bfloat16), base, "BF16",
        notes="bert-tiny weights stored as BF16; reference uses BF16-rounded weights computed in float32")
    add("bert-tiny-torchscript", bert_cfg, base, base, "F32", kind="torchscript",
        notes="TorchScript (torch.jit.script) model.pt; named_parameters() == bert-tiny names/values; "
              "forward(input_ids, attention_mask, token_type_ids) -> (last_hidden_state, pooler_output)")
    add("bert-tiny-qa", dict(bert_cfg, architectures=["BertForQuestionAnswering"]), qa_sd, qa_sd, "F32",
        notes="BertForQuestionAnswering: 'bert.' prefix, no pooler, qa_outputs [2,H]; own random weights")
    add("distilbert-tiny", dcfg, dsd, dsd, "F32",
        notes="DistilBertModel, unprefixed names; token_type_ids in the cases are ignored by this model")
    add("bert-tiny-gelu-new", dict(bert_cfg, hidden_act="gelu_new"), base, base, "F32",
        notes="extra: bert-tiny weights with hidden_act 'gelu_new' (tanh approximation)")

    ref = {
        "format_version": FORMAT_VERSION,
        "generator": "tests/reference/make_tiny_models.py",
        "seed": args.seed,
        "torch_version": torch.__version__,
        "float_format": "float32 values printed with 9 significant digits (round-trip exact)",
        "tolerance": {"atol": 1e-4, "rtol": 1e-4,
                      "note": "reference computed in float32 on CPU; F16/BF16 models are referenced against "
                              "float32 compute on the rounded weights"},
        "pooling": {"mean_pooled": "sum(h*mask)/max(sum(mask),1e-9) over the sequence axis",
                    "cls_pooled": "last_hidden_state[:, 0] (not the pooler)"},
        "tokenize": tok_section,
        "models": [],
    }

    for name, cfg, ref_sd, files_sd, st_dtype, kind, notes in models:
        t1 = time.perf_counter()
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        write_json(os.path.join(d, "config.json"), cfg)
        write_vocab(os.path.join(d, "vocab.txt"), vocab_list)
        if kind == "safetensors":
            wfile = "model.safetensors"
            rb.write_safetensors(os.path.join(d, wfile), files_sd, st_dtype, {"format": "pt"})
        else:
            wfile = "model.pt"
            m = rb.build_module(cfg, files_sd, pooler=True)
            sm = torch.jit.script(m)
            torch.jit.save(sm, os.path.join(d, wfile))
        has_pooler = any(k.endswith("pooler.dense.weight") for k in ref_sd)
        outputs = ["last_hidden_state", "mean_pooled", "cls_pooled"]
        if has_pooler:
            outputs.append("pooler_output")
        if "qa_outputs.weight" in ref_sd:
            outputs += ["start_logits", "end_logits"]
        entry = {
            "model": name,
            "model_type": cfg["model_type"],
            "architectures": cfg["architectures"],
            "weights_file": wfile,
            "weights_dtype": st_dtype,
            "tensor_prefix": "bert." if any(k.startswith("bert.") for k in files_sd) else "",
            "has_pooler": has_pooler,
            "outputs": outputs,
            "notes": notes,
            "cases": run_cases(ref_sd, cfg, cases, cfg["model_type"]),
        }
        ref["models"].append(entry)
        print(f"  wrote {name:22s} {wfile:18s} {st_dtype:4s} ({len(files_sd)} tensors) "
              f"in {1000 * (time.perf_counter() - t1):.0f} ms")

    write_json(os.path.join(out, "reference.json"), ref)
    print(f"[make_tiny_models] wrote {os.path.join(out, 'reference.json')} "
          f"({os.path.getsize(os.path.join(out, 'reference.json')) / 1024:.0f} KiB) "
          f"in {time.perf_counter() - t0:.2f} s")

    if not args.no_check:
        import check_reference
        rc = check_reference.main([out])
        if rc != 0:
            return rc
    print(f"[make_tiny_models] done in {time.perf_counter() - t0:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
