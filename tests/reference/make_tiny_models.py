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
import collections
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


def roberta_cases(cases):
    """The cases for a RoBERTa-family model: ids 0 and 1 swapped (its padding id is 1) and one token type."""
    swap = {0: 1, 1: 0}
    out = []
    for c in cases:
        rc = dict(c, name=c["name"])
        rc["input_ids"] = [[swap.get(i, i) for i in row] for row in c["input_ids"]]
        rc["token_type_ids"] = [[0] * len(row) for row in c["token_type_ids"]]
        out.append(rc)
    return out


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


def write_weights(d, kind, files_sd, st_dtype, cfg):
    """Writes one model's tensors in the layout `kind` names; returns the file the loader reads first."""
    if kind == "safetensors":
        rb.write_safetensors(os.path.join(d, "model.safetensors"), files_sd, st_dtype, {"format": "pt"})
        return "model.safetensors"
    if kind in ("bin", "legacy-bin"):
        # legacy-bin: the format torch.save wrote before PyTorch 1.6 (pickles, then raw storages).
        torch.save(collections.OrderedDict(files_sd), os.path.join(d, "pytorch_model.bin"),
                   _use_new_zipfile_serialization=kind == "bin")
        return "pytorch_model.bin"
    if kind in ("sharded-safetensors", "sharded-bin"):
        # Two shards split by name order, named and indexed as save_pretrained does.
        names = sorted(files_sd)
        halves = [names[: len(names) // 2], names[len(names) // 2:]]
        st = kind == "sharded-safetensors"
        weight_map, total = {}, 0
        for i, half in enumerate(halves):
            shard = f"model-{i + 1:05d}-of-00002.safetensors" if st else f"pytorch_model-{i + 1:05d}-of-00002.bin"
            part = {k: files_sd[k] for k in half}
            if st:
                rb.write_safetensors(os.path.join(d, shard), part, st_dtype, {"format": "pt"})
            else:
                torch.save(collections.OrderedDict(part), os.path.join(d, shard))
            for k in half:
                weight_map[k] = shard
                total += files_sd[k].numel() * 4
        index = "model.safetensors.index.json" if st else "pytorch_model.bin.index.json"
        write_json(os.path.join(d, index), {"metadata": {"total_size": total}, "weight_map": weight_map})
        return index
    m = rb.build_module(cfg, files_sd, pooler=True)
    torch.jit.save(torch.jit.script(m), os.path.join(d, "model.pt"))
    return "model.pt"


# --------------------------------------------------------------------------
# sentence-transformers layouts
# --------------------------------------------------------------------------

ST_TEXTS = [
    "How do I reset my password?",
    "如何重置密码",
    "where is my order? it shipped yesterday and will arrive soon, can you help with the phone or email",
]
ST_DENSE = "torch.nn.modules.activation.Tanh"


def st_pool(h, mask, modes, skip):
    """sentence-transformers' Pooling.forward for one right-padded batch; `skip` leading tokens are left
    out where include_prompt is false."""
    pmask = mask.clone()
    pmask[:, :skip] = 0
    m = pmask.unsqueeze(-1).float()
    parts = []
    for mode in modes:
        if mode == "cls":
            parts.append(h[:, 0])
        elif mode == "max":
            parts.append(h.masked_fill(m == 0, -1e9).max(1)[0])
        elif mode == "mean":
            parts.append((h * m).sum(1) / torch.clamp(m.sum(1), min=1e-9))
        elif mode == "mean_sqrt_len":
            parts.append((h * m).sum(1) / torch.sqrt(torch.clamp(m.sum(1), min=1e-9)))
        elif mode == "weightedmean":
            w = torch.arange(1, h.shape[1] + 1).unsqueeze(0).unsqueeze(-1).float() * m
            parts.append((h * w).sum(1) / torch.clamp(w.sum(1), min=1e-9))
        elif mode == "lasttoken":
            parts.append(h[torch.arange(h.shape[0]), mask.sum(1) - 1])
    return torch.cat(parts, 1)


def st_case(name, vocab, sd, cfg, texts, prompt, max_len, modes, include_prompt, stages, options):
    ids_rows, vectors = [], []
    skip = 0
    if prompt and not include_prompt:
        skip = len(rb.encode(vocab, prompt)["input_ids"]) - 1
    for text in texts:
        ids = rb.encode(vocab, prompt + text)["input_ids"]
        if len(ids) > max_len:
            ids = ids[: max_len - 1] + [ids[-1]]
        ids_rows.append(ids)
        t = torch.tensor([ids])
        with torch.no_grad():
            h = rb.model_forward(sd, cfg, t, torch.ones_like(t), torch.zeros_like(t))["last_hidden_state"]
            v = st_pool(h, torch.ones_like(t), modes, skip)
            for kind, arg in stages:
                if kind == "dense":
                    w, b, act = arg
                    v = v @ w.T + (b if b is not None else 0)
                    v = torch.tanh(v) if act == ST_DENSE else v
                else:
                    v = v / torch.clamp(v.norm(dim=1, keepdim=True), min=1e-12)
        vectors.append(v[0].tolist())
    return {"name": name, "options": options, "texts": texts, "prompt": prompt, "token_ids": ids_rows,
            "vectors": fl(vectors)}


def write_sentence_transformers(out, vocab, vocab_list, base, cfg, seed):
    """Three sentence-transformers directories over bert-tiny's weights and their vectors."""
    H = cfg["hidden_size"]
    g = torch.Generator().manual_seed(seed + 7)
    entries = []

    def module_list(*mods):
        return [{"idx": i, "name": str(i), "path": path, "type": "sentence_transformers.models." + kind}
                for i, (kind, path) in enumerate(mods)]

    def pooling_config(modes, include_prompt=True):
        keys = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "max": "pooling_mode_max_tokens",
                "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
                "weightedmean": "pooling_mode_weightedmean_tokens", "lasttoken": "pooling_mode_lasttoken"}
        c = {"word_embedding_dimension": H}
        c.update({v: k in modes for k, v in keys.items()})
        c["include_prompt"] = include_prompt
        return c

    def transformer_files(d, kind):
        os.makedirs(d, exist_ok=True)
        write_json(os.path.join(d, "config.json"), cfg)
        write_vocab(os.path.join(d, "vocab.txt"), vocab_list)
        write_weights(d, kind, base, "F32", cfg)

    # A: today's layout (transformer at the root, as pytorch_model.bin), mean pooling, Normalize, E5-style
    # prompts, a short max_seq_length.
    d = os.path.join(out, "st-mean-prompts")
    transformer_files(d, "bin")
    write_json(os.path.join(d, "modules.json"), module_list(("Transformer", ""), ("Pooling", "1_Pooling"),
                                                            ("Normalize", "2_Normalize")))
    os.makedirs(os.path.join(d, "1_Pooling"), exist_ok=True)
    os.makedirs(os.path.join(d, "2_Normalize"), exist_ok=True)
    write_json(os.path.join(d, "1_Pooling", "config.json"), pooling_config(["mean"]))
    write_json(os.path.join(d, "sentence_bert_config.json"), {"max_seq_length": 12, "do_lower_case": False})
    write_json(os.path.join(d, "config_sentence_transformers.json"),
               {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": None,
                "similarity_fn_name": "cosine"})
    normalize = [("normalize", None)]
    entries.append({"model": "st-mean-prompts", "cases": [
        st_case("query prompt by default", vocab, base, cfg, ST_TEXTS, "query: ", 12, ["mean"], True, normalize, {}),
        st_case("passage prompt", vocab, base, cfg, ST_TEXTS, "passage: ", 12, ["mean"], True, normalize,
                {"prompt_name": "passage"}),
        st_case("explicit empty prompt", vocab, base, cfg, ST_TEXTS, "", 12, ["mean"], True, normalize,
                {"prompt": ""}),
        st_case("explicit cls pooling and length", vocab, base, cfg, ST_TEXTS, "query: ", 20, ["cls"], True,
                normalize, {"pooling": "cls", "max_sequence_length": 20}),
    ]})

    # B: the older layout (transformer in 0_Transformer), cls+max concatenated with the prompt left out,
    # a Tanh Dense read from pytorch_model.bin, then Normalize.
    d = os.path.join(out, "st-dense-legacy-layout")
    transformer_files(os.path.join(d, "0_Transformer"), "safetensors")
    write_json(os.path.join(d, "modules.json"), module_list(("Transformer", "0_Transformer"), ("Pooling", "1_Pooling"),
                                                            ("Dense", "2_Dense"), ("Normalize", "3_Normalize")))
    for sub in ("1_Pooling", "2_Dense", "3_Normalize"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    write_json(os.path.join(d, "1_Pooling", "config.json"), pooling_config(["cls", "max"], include_prompt=False))
    w = torch.randn(24, 2 * H, generator=g) * 0.15
    b = torch.randn(24, generator=g) * 0.02
    write_json(os.path.join(d, "2_Dense", "config.json"),
               {"in_features": 2 * H, "out_features": 24, "bias": True, "activation_function": ST_DENSE})
    torch.save(collections.OrderedDict([("linear.weight", w), ("linear.bias", b)]),
               os.path.join(d, "2_Dense", "pytorch_model.bin"))
    write_json(os.path.join(d, "config_sentence_transformers.json"), {"prompts": {"query": "query: "}})
    entries.append({"model": "st-dense-legacy-layout", "cases": [
        st_case("cls+max, prompt left out of pooling, Dense, Normalize", vocab, base, cfg, ST_TEXTS, "query: ",
                cfg["max_position_embeddings"], ["cls", "max"], False, [("dense", (w, b, ST_DENSE))] + normalize,
                {"max_sequence_length": 128}),
    ]})

    # C: three less common modes concatenated, an Identity Dense without bias from model.safetensors, no
    # Normalize.
    d = os.path.join(out, "st-three-modes")
    transformer_files(d, "safetensors")
    write_json(os.path.join(d, "modules.json"), module_list(("Transformer", ""), ("Pooling", "1_Pooling"),
                                                            ("Dense", "2_Dense")))
    for sub in ("1_Pooling", "2_Dense"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    modes = ["mean_sqrt_len", "weightedmean", "lasttoken"]
    write_json(os.path.join(d, "1_Pooling", "config.json"), pooling_config(modes))
    w = torch.randn(16, 3 * H, generator=g) * 0.15
    identity = "torch.nn.modules.linear.Identity"
    write_json(os.path.join(d, "2_Dense", "config.json"),
               {"in_features": 3 * H, "out_features": 16, "bias": False, "activation_function": identity})
    rb.write_safetensors(os.path.join(d, "2_Dense", "model.safetensors"), {"linear.weight": w}, "F32",
                         {"format": "pt"})
    entries.append({"model": "st-three-modes", "cases": [
        st_case("mean_sqrt_len+weightedmean+lasttoken, Identity Dense", vocab, base, cfg, ST_TEXTS, "",
                cfg["max_position_embeddings"], modes, True, [("dense", (w, None, identity))], {}),
    ]})
    return entries


def write_family_sentence_transformers(out, vocab_list, families):
    """A sentence-transformers directory per family (the transformer at the root, in the format given), as
    all-mpnet-base-v2, multilingual-e5 or a RoBERTa sentence model ship, and the vectors their modules make.
    The RoBERTa family pads with id 1, so its vocab.txt puts [PAD] there: a real tokenizer never gives the
    padding id to text, and neither does this one."""
    entries = []
    for name, cfg, sd, kind, modes, prompts, max_seq in families:
        words = list(vocab_list)
        if cfg["model_type"] in rb.ROBERTA_FAMILY:
            words[0], words[1] = words[1], words[0]
        vocab = {w: i for i, w in enumerate(words)}
        d = os.path.join(out, name)
        os.makedirs(os.path.join(d, "1_Pooling"), exist_ok=True)
        os.makedirs(os.path.join(d, "2_Normalize"), exist_ok=True)
        write_json(os.path.join(d, "config.json"), cfg)
        write_vocab(os.path.join(d, "vocab.txt"), words)
        write_weights(d, kind, sd, "F32", cfg)
        write_json(os.path.join(d, "modules.json"),
                   [{"idx": i, "name": str(i), "path": path, "type": "sentence_transformers.models." + k}
                    for i, (k, path) in enumerate([("Transformer", ""), ("Pooling", "1_Pooling"),
                                                   ("Normalize", "2_Normalize")])])
        keys = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "max": "pooling_mode_max_tokens"}
        pooling = {"word_embedding_dimension": cfg.get("hidden_size", cfg.get("dim"))}
        pooling.update({v: k in modes for k, v in keys.items()})
        write_json(os.path.join(d, "1_Pooling", "config.json"), pooling)
        write_json(os.path.join(d, "sentence_bert_config.json"), {"max_seq_length": max_seq, "do_lower_case": False})
        if prompts:
            write_json(os.path.join(d, "config_sentence_transformers.json"), {"prompts": prompts})
        query = (prompts or {}).get("query", "")
        normalize = [("normalize", None)]
        cases = [st_case(f"{cfg['model_type']} {'+'.join(modes)}", vocab, sd, cfg, ST_TEXTS, query, max_seq, modes,
                         True, normalize, {})]
        if prompts and "passage" in prompts:
            cases.append(st_case("passage prompt", vocab, sd, cfg, ST_TEXTS, prompts["passage"], max_seq, modes, True,
                                 normalize, {"prompt_name": "passage"}))
        entries.append({"model": name, "cases": cases})
    return entries


class _RunsACommand:
    """Unpickling this runs a shell command: what a malicious pytorch_model.bin carries."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, ("touch " + self.marker,))


def write_malicious_bin(out, cfg, vocab_list, base):
    """bert-tiny's tensors in a pytorch_model.bin whose pickle also calls os.system: loading it must be refused
    and must not create the marker file."""
    d = os.path.join(out, "malicious-bin")
    os.makedirs(d, exist_ok=True)
    write_json(os.path.join(d, "config.json"), cfg)
    write_vocab(os.path.join(d, "vocab.txt"), vocab_list)
    marker = os.path.join(out, "malicious-bin-ran")
    sd = collections.OrderedDict(base)
    sd["pooler.dense.extra"] = _RunsACommand(marker)
    torch.save(sd, os.path.join(d, "pytorch_model.bin"))
    legacy = os.path.join(out, "malicious-legacy-bin")
    os.makedirs(legacy, exist_ok=True)
    write_json(os.path.join(legacy, "config.json"), cfg)
    write_vocab(os.path.join(legacy, "vocab.txt"), vocab_list)
    torch.save(sd, os.path.join(legacy, "pytorch_model.bin"), _use_new_zipfile_serialization=False)
    return {"models": ["malicious-bin", "malicious-legacy-bin"], "marker": marker}


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
    add("bert-tiny-bin", mlm_cfg, base, pre, "F32", kind="bin",
        notes="bert-tiny-prefixed's tensors as pytorch_model.bin (torch.save's zip format)")
    add("bert-tiny-legacy-bin", dict(bert_cfg, torch_dtype="float16"), rb.round_trip(base, torch.float16),
        {k: v.half() for k, v in base.items()}, "F16", kind="legacy-bin",
        notes="bert-tiny's weights as F16 in torch.save's format from before PyTorch 1.6")
    add("bert-tiny-sharded", bert_cfg, base, base, "F32", kind="sharded-safetensors",
        notes="bert-tiny in two safetensors shards behind model.safetensors.index.json")
    # The RoBERTa family: one token type, positions past the padding index (pad id 1, as in RoBERTa's
    # vocabulary), so its cases swap ids 0 and 1 of the shared vocabulary and keep one token type.
    rcfg = rb.roberta_config(V)
    rsd = rb.random_bert_state_dict(rcfg, torch.Generator().manual_seed(args.seed + 4), pooler=True,
                                    linear_std=LINEAR_STD)
    add("roberta-tiny", rcfg, rsd, rsd, "F32", notes="RobertaModel, unprefixed names, pooler")
    rmlm = prefixed(rsd, "roberta.")
    rmlm["lm_head.bias"] = torch.randn(V, generator=torch.Generator().manual_seed(args.seed + 5)) * 0.02
    add("roberta-tiny-bin", dict(rcfg, architectures=["RobertaForMaskedLM"]), rsd, rmlm, "F32", kind="bin",
        notes="roberta-tiny's weights under 'roberta.' with an unused lm_head.bias, as pytorch_model.bin")
    xcfg = rb.roberta_config(V, model_type="xlm-roberta", architectures=["XLMRobertaForQuestionAnswering"])
    g_xqa = torch.Generator().manual_seed(args.seed + 6)
    xqa = prefixed(rb.random_bert_state_dict(xcfg, g_xqa, pooler=False, linear_std=LINEAR_STD), "roberta.")
    xqa["qa_outputs.weight"] = torch.randn(2, H, generator=g_xqa) * LINEAR_STD
    xqa["qa_outputs.bias"] = torch.randn(2, generator=g_xqa) * 0.02
    add("xlm-roberta-tiny-qa-sharded", xcfg, xqa, xqa, "F32", kind="sharded-safetensors",
        notes="XLMRobertaForQuestionAnswering ('roberta.' prefix, qa_outputs) in two safetensors shards")
    add("camembert-tiny-sharded-bin", dict(rcfg, model_type="camembert", architectures=["CamembertModel"]), rsd, rsd,
        "F32", kind="sharded-bin", notes="roberta-tiny's weights as CamembertModel in two pytorch_model.bin shards")
    # ELECTRA: embeddings half the layers' width, projected up; MPNet: a relative position bias.
    ecfg = rb.electra_config(V)
    esd = rb.random_electra_state_dict(ecfg, torch.Generator().manual_seed(args.seed + 8), LINEAR_STD)
    add("electra-tiny", ecfg, esd, esd, "F32", notes="ElectraModel (discriminator body), embedding_size 16")
    g_eqa = torch.Generator().manual_seed(args.seed + 9)
    eqa = prefixed(rb.random_electra_state_dict(ecfg, g_eqa, LINEAR_STD), "electra.")
    eqa["qa_outputs.weight"] = torch.randn(2, H, generator=g_eqa) * LINEAR_STD
    eqa["qa_outputs.bias"] = torch.randn(2, generator=g_eqa) * 0.02
    add("electra-tiny-qa-bin", dict(ecfg, architectures=["ElectraForQuestionAnswering"]), eqa, eqa, "F32",
        kind="bin", notes="ElectraForQuestionAnswering ('electra.' prefix, qa_outputs) as pytorch_model.bin")
    mcfg = rb.mpnet_config(V)
    msd = rb.random_mpnet_state_dict(mcfg, torch.Generator().manual_seed(args.seed + 10), LINEAR_STD)
    add("mpnet-tiny", mcfg, msd, msd, "F32", notes="MPNetModel with pooler; relative bias N(0, 1)")
    add("mpnet-tiny-sharded-bin", dict(mcfg, architectures=["MPNetForMaskedLM"]), msd, prefixed(msd, "mpnet."), "F32",
        kind="sharded-bin", notes="mpnet-tiny's weights under 'mpnet.' in two pytorch_model.bin shards")
    add("bert-tiny-qa-sharded-bin", dict(bert_cfg, architectures=["BertForQuestionAnswering"]), qa_sd, qa_sd, "F32",
        kind="sharded-bin", notes="bert-tiny-qa in two pytorch_model.bin shards behind pytorch_model.bin.index.json")
    # Every new family in every weights format: safetensors, pytorch_model.bin, sharded.
    xcfg_base = dict(rcfg, model_type="xlm-roberta", architectures=["XLMRobertaModel"])
    add("xlm-roberta-tiny", xcfg_base, rsd, rsd, "F32", notes="roberta-tiny's weights as XLMRobertaModel")
    add("xlm-roberta-tiny-bin", dict(xcfg_base, architectures=["XLMRobertaForMaskedLM"]), rsd, rmlm, "F32",
        kind="bin", notes="roberta-tiny-bin's tensors as XLMRobertaForMaskedLM")
    add("roberta-tiny-sharded", rcfg, rsd, rsd, "F32", kind="sharded-safetensors",
        notes="roberta-tiny in two safetensors shards")
    ccfg = dict(rcfg, model_type="camembert", architectures=["CamembertModel"])
    add("camembert-tiny", ccfg, rsd, rsd, "F32", notes="roberta-tiny's weights as CamembertModel")
    add("camembert-tiny-bin", ccfg, rsd, rsd, "F32", kind="bin", notes="camembert-tiny as pytorch_model.bin")
    add("mpnet-tiny-bin", mcfg, msd, msd, "F32", kind="bin", notes="mpnet-tiny as pytorch_model.bin")
    add("electra-tiny-sharded", ecfg, esd, esd, "F32", kind="sharded-safetensors",
        notes="electra-tiny in two safetensors shards")
    add("distilbert-tiny-bin", dcfg, dsd, prefixed(dsd, "distilbert."), "F32", kind="bin",
        notes="distilbert-tiny's weights under 'distilbert.' as pytorch_model.bin")
    add("distilbert-tiny-sharded", dcfg, dsd, dsd, "F32", kind="sharded-safetensors",
        notes="distilbert-tiny in two safetensors shards")

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
        wfile = write_weights(d, kind, files_sd, st_dtype, cfg)
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
            "tensor_prefix": next((p for p in ("bert.", "roberta.", "distilbert.", "electra.", "mpnet.")
                                   if p + "embeddings.word_embeddings.weight" in files_sd), ""),
            "extra_tensors": sorted(k for k in files_sd if k.startswith(("cls.", "lm_head."))),
            "has_pooler": has_pooler,
            "outputs": outputs,
            "notes": notes,
            "cases": run_cases(ref_sd, cfg, roberta_cases(cases) if cfg["model_type"] in rb.ROBERTA_FAMILY else cases,
                               cfg["model_type"]),
        }
        ref["models"].append(entry)
        print(f"  wrote {name:22s} {wfile:18s} {st_dtype:4s} ({len(files_sd)} tensors) "
              f"in {1000 * (time.perf_counter() - t1):.0f} ms")

    ref["sentence_transformers"] = write_sentence_transformers(out, vocab, vocab_list, base, bert_cfg, args.seed)
    ref["sentence_transformers"] += write_family_sentence_transformers(out, vocab_list, [
        ("st-roberta", rcfg, rsd, "safetensors", ["mean"], None, 24),
        ("st-xlm-roberta-e5", xcfg_base, rsd, "bin", ["mean"], {"query": "query: ", "passage": "passage: "}, 16),
        ("st-camembert-sharded", ccfg, rsd, "sharded-bin", ["cls"], None, 24),
        ("st-mpnet", mcfg, msd, "safetensors", ["mean"], None, 20),
        ("st-electra-sharded", ecfg, esd, "sharded-safetensors", ["cls", "max"], None, 24),
        ("st-distilbert-bin", dcfg, dsd, "bin", ["mean"], None, 24),
    ])
    ref["malicious"] = write_malicious_bin(out, bert_cfg, vocab_list, base)
    ref["sentence_transformers_note"] = (
        "vectors as the sentence-transformers pipeline makes them (pooling, Dense, Normalize modules); the "
        "encoder's own final L2 normalisation is off for the comparison")
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
