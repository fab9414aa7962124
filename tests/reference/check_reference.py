#!/usr/bin/env python3
"""End-to-end self-check of the output of make_tiny_models.py.

Usage:  python3 tests/reference/check_reference.py OUTDIR

For every model listed in OUTDIR/reference.json:
  * re-reads config.json + model.safetensors with the hand-written reader (checks the
    header is 8-byte padded, tensors are contiguous, dtypes are the advertised
    F32/F16/BF16, the tensor names/shapes are exactly what HF would save for the
    config), or loads model.pt with torch.jit.load and checks its named_parameters()
    against bert-tiny's names and values;
  * reruns the functional reference forward on the reloaded weights and compares
    with reference.json;
  * cross-checks with a second implementation: the nn.Module BertModel (also used for
    TorchScript and the benchmarks) and, for the TorchScript model, its own forward;
    DistilBERT is mapped onto the BERT module (no token types) for the same purpose;
  * checks the pooled outputs in reference.json against its last_hidden_state.
It also re-tokenizes the "tokenize" sentences from vocab.txt, checks the functional
attention against torch.nn.functional.multi_head_attention_forward, and checks the
F16/BF16 files hold exactly bert-tiny's weights rounded to that dtype.
"""

from __future__ import annotations

import json
import os
import sys
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import reference_bert as rb  # noqa: E402

EXACT_TOL = 2e-6     # reference forward rerun on reloaded weights (same code path)
CROSS_TOL = 2e-5     # different implementation (nn.Module / TorchScript / MHA)


class Checker:
    def __init__(self):
        self.failures = []
        self.n = 0

    def ok(self, cond, msg):
        self.n += 1
        if not cond:
            self.failures.append(msg)
            print(f"    FAIL: {msg}")

    def close(self, a, b, tol, msg):
        a = torch.as_tensor(a, dtype=torch.float32)
        b = torch.as_tensor(b, dtype=torch.float32)
        if a.shape != b.shape:
            self.ok(False, f"{msg}: shape {tuple(a.shape)} vs {tuple(b.shape)}")
            return float("inf")
        d = (a - b).abs().max().item() if a.numel() else 0.0
        self.ok(d <= tol, f"{msg}: max|diff| {d:.3g} > {tol}")
        return d


def expected_bert_names(cfg, pooler):
    names = ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
             "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"]
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for n in ("attention.self.query", "attention.self.key", "attention.self.value",
                  "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
                  "output.dense", "output.LayerNorm"):
            names += [p + n + ".weight", p + n + ".bias"]
    if pooler:
        names += ["pooler.dense.weight", "pooler.dense.bias"]
    return names


def expected_other_names(cfg, pooler):
    """MPNet's and ELECTRA's tensor names, unprefixed."""
    if cfg["model_type"] == "electra":
        return expected_bert_names(cfg, False) + ["embeddings_project.weight", "embeddings_project.bias"]
    names = ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
             "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias", "encoder.relative_attention_bias.weight"]
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for n in ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o",
                  "attention.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"):
            names += [p + n + ".weight", p + n + ".bias"]
    if pooler:
        names += ["pooler.dense.weight", "pooler.dense.bias"]
    return names


def expected_shapes(cfg, names):
    if cfg["model_type"] == "distilbert":
        H, I, P, T = cfg["dim"], cfg["hidden_dim"], cfg["max_position_embeddings"], 0
    else:
        H, I, P, T = (cfg["hidden_size"], cfg["intermediate_size"], cfg["max_position_embeddings"],
                      cfg.get("type_vocab_size", 0))
    V = cfg["vocab_size"]
    E = cfg.get("embedding_size", H)
    shp = {}
    for n in names:
        base = n.split(".", 1)[1] if n.startswith(("bert.", "distilbert.", "roberta.", "electra.", "mpnet.")) else n
        if base == "embeddings.word_embeddings.weight":
            s = [V, E]
        elif base == "embeddings.position_embeddings.weight":
            s = [P, E]
        elif base == "embeddings.token_type_embeddings.weight":
            s = [T, E]
        elif base.startswith("embeddings.LayerNorm."):
            s = [E]
        elif base == "embeddings_project.weight":
            s = [H, E]
        elif base == "encoder.relative_attention_bias.weight":
            s = [cfg["relative_attention_num_buckets"], cfg["num_attention_heads"]]
        elif base == "qa_outputs.weight":
            s = [2, H]
        elif base == "qa_outputs.bias":
            s = [2]
        elif base in ("cls.predictions.bias", "lm_head.bias"):
            s = [V]
        elif base.endswith(("intermediate.dense.weight", "ffn.lin1.weight")):
            s = [I, H]
        elif base.endswith(("intermediate.dense.bias", "ffn.lin1.bias")):
            s = [I]
        elif base.endswith(("output.dense.weight", "ffn.lin2.weight")) and "attention" not in base:
            s = [H, I]
        elif base.endswith(".weight") and ("LayerNorm" in base or "layer_norm" in base):
            s = [H]
        elif base.endswith(".weight"):
            s = [H, H]
        else:
            s = [H]
        shp[n] = s
    return shp


def expected_distil_names(cfg):
    names = ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
             "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"]
    for i in range(cfg["n_layers"]):
        p = f"transformer.layer.{i}."
        for n in ("attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
                  "sa_layer_norm", "ffn.lin1", "ffn.lin2", "output_layer_norm"):
            names += [p + n + ".weight", p + n + ".bias"]
    return names


def distil_as_bert(sd, cfg):
    """Map DistilBERT weights onto BertModel names (type_vocab_size 1, zero type embedding)."""
    D = cfg["dim"]
    bcfg = rb.bert_config(cfg["vocab_size"], hidden_size=D, num_hidden_layers=cfg["n_layers"],
                          num_attention_heads=cfg["n_heads"], intermediate_size=cfg["hidden_dim"],
                          max_position_embeddings=cfg["max_position_embeddings"], type_vocab_size=1,
                          layer_norm_eps=1e-12, hidden_act=cfg["activation"])
    m = {"embeddings.word_embeddings.weight": "embeddings.word_embeddings.weight",
         "embeddings.position_embeddings.weight": "embeddings.position_embeddings.weight",
         "embeddings.LayerNorm.weight": "embeddings.LayerNorm.weight",
         "embeddings.LayerNorm.bias": "embeddings.LayerNorm.bias"}
    sub = {"attention.q_lin": "attention.self.query", "attention.k_lin": "attention.self.key",
           "attention.v_lin": "attention.self.value", "attention.out_lin": "attention.output.dense",
           "sa_layer_norm": "attention.output.LayerNorm", "ffn.lin1": "intermediate.dense",
           "ffn.lin2": "output.dense", "output_layer_norm": "output.LayerNorm"}
    out = {}
    for k, v in sd.items():
        k = k[len("distilbert."):] if k.startswith("distilbert.") else k
        if k in m:
            out[m[k]] = v
            continue
        i = int(k.split(".")[2])
        rest = k.split(".", 3)[3]
        stem, wb = rest.rsplit(".", 1)
        out[f"encoder.layer.{i}.{sub[stem]}.{wb}"] = v
    out["embeddings.token_type_embeddings.weight"] = torch.zeros(1, D)
    return bcfg, out


def check_mha(c, sd, cfg, case):
    """Functional BERT attention vs torch's multi_head_attention_forward (layer 0 of bert-tiny)."""
    ids = torch.tensor(case["input_ids"])
    mask = torch.tensor(case["attention_mask"])
    tt = torch.tensor(case["token_type_ids"])
    H, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    pos = torch.arange(ids.shape[1])[None].expand_as(ids)
    x = (F.embedding(ids, sd["embeddings.word_embeddings.weight"])
         + F.embedding(tt, sd["embeddings.token_type_embeddings.weight"])
         + F.embedding(pos, sd["embeddings.position_embeddings.weight"]))
    x = F.layer_norm(x, (H,), sd["embeddings.LayerNorm.weight"], sd["embeddings.LayerNorm.bias"],
                     cfg["layer_norm_eps"])
    p = "encoder.layer.0.attention."
    ctx = rb._mha(x, mask, sd[p + "self.query.weight"], sd[p + "self.query.bias"], sd[p + "self.key.weight"],
                  sd[p + "self.key.bias"], sd[p + "self.value.weight"], sd[p + "self.value.bias"], heads)
    mine = F.linear(ctx, sd[p + "output.dense.weight"], sd[p + "output.dense.bias"])
    w = torch.cat([sd[p + "self.query.weight"], sd[p + "self.key.weight"], sd[p + "self.value.weight"]])
    b = torch.cat([sd[p + "self.query.bias"], sd[p + "self.key.bias"], sd[p + "self.value.bias"]])
    xt = x.transpose(0, 1)  # [S,B,H]
    theirs, _ = F.multi_head_attention_forward(
        xt, xt, xt, H, heads, w, b, None, None, False, 0.0,
        sd[p + "output.dense.weight"], sd[p + "output.dense.bias"], training=False,
        key_padding_mask=(mask == 0), need_weights=False)
    theirs = theirs.transpose(0, 1)
    valid = mask.bool()
    return c.close(mine[valid], theirs[valid], CROSS_TOL, "attention vs F.multi_head_attention_forward")


def read_weights(c, name, d, wfile, dtype):
    """The tensors of one weights file (or index of shards), read by PyTorch's own loaders; with the
    TorchScript module when the file is one."""
    path = os.path.join(d, wfile)
    if wfile.endswith(".index.json"):
        with open(path, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
        sd = {}
        for shard in sorted(set(weight_map.values())):
            part, _ = read_weights(c, name, d, shard, dtype)
            c.ok(not set(part) & set(sd), f"{name}: {shard} repeats a tensor")
            c.ok(all(weight_map[k] == shard for k in part), f"{name}: {shard} holds tensors the index puts elsewhere")
            sd.update(part)
        c.ok(sorted(sd) == sorted(weight_map), f"{name}: the shards hold what the index names")
        return sd, None
    if wfile.endswith(".safetensors"):
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
        c.ok(n % 8 == 0, f"{name}: header length {n} multiple of 8")
        sd, dtypes, meta = rb.read_safetensors(path)
        c.ok(meta == {"format": "pt"}, f"{name}: __metadata__ {meta}")
        c.ok(set(dtypes.values()) == {dtype}, f"{name}: stored dtypes {set(dtypes.values())} == {dtype}")
        return sd, None
    if wfile.endswith(".bin"):
        c.ok(zipfile.is_zipfile(path) == ("legacy" not in name), f"{name}: {wfile} is in the format its name says")
        sd = dict(torch.load(path, map_location="cpu", weights_only=True))
        c.ok({str(v.dtype) for v in sd.values()} == {{"F32": "torch.float32", "F16": "torch.float16"}[dtype]},
             f"{name}: stored as {dtype}")
        return {k: v.float() for k, v in sd.items()}, None
    sm = torch.jit.load(path)
    return {k: v.detach().clone() for k, v in sm.named_parameters()}, sm


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__)
        return 2
    out = os.path.abspath(argv[0])
    t0 = time.perf_counter()
    torch.set_num_threads(1)
    c = Checker()
    with open(os.path.join(out, "reference.json"), encoding="utf-8") as f:
        ref = json.load(f)
    print(f"[check_reference] {out}: {len(ref['models'])} models")

    # ---- tokenizer
    tokv = rb.load_vocab(os.path.join(out, ref["tokenize"]["vocab_file"]))
    for tc in ref["tokenize"]["cases"]:
        enc = rb.encode(tokv, tc["text"], tc.get("text_pair"))
        c.ok(enc["input_ids"] == tc["input_ids"] and enc["tokens"] == tc["tokens"]
             and enc["token_type_ids"] == tc["token_type_ids"], f"tokenize {tc['name']}")
        c.ok(all(tokv_id < len(tokv) for tokv_id in tc["input_ids"]), f"tokenize {tc['name']} ids in range")
    print(f"  tokenizer: {len(ref['tokenize']['cases'])} cases re-encoded")

    loaded = {}
    with torch.no_grad():
        for entry in ref["models"]:
            name = entry["model"]
            d = os.path.join(out, name)
            with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
                cfg = json.load(f)
            vocab = rb.load_vocab(os.path.join(d, "vocab.txt"))
            c.ok(vocab == tokv, f"{name}: vocab.txt identical to tokenizer vocab")
            c.ok(len(vocab) == cfg["vocab_size"], f"{name}: vocab_size {cfg['vocab_size']} == {len(vocab)} lines")
            c.ok(cfg["model_type"] == entry["model_type"], f"{name}: model_type")
            wpath = os.path.join(d, entry["weights_file"])

            sd, sm = read_weights(c, name, d, entry["weights_file"], entry["weights_dtype"])
            if sm is not None:
                c.ok(len(list(sm.named_buffers())) == 0, f"{name}: TorchScript has no buffers")

            # expected names / shapes, derived from the config
            if cfg["model_type"] == "distilbert":
                exp = [entry["tensor_prefix"] + k for k in expected_distil_names(cfg)]
            elif cfg["model_type"] in ("mpnet", "electra"):
                pre = entry["tensor_prefix"]
                exp = [pre + k for k in expected_other_names(cfg, entry["has_pooler"])]
                if any(a.endswith("ForQuestionAnswering") for a in cfg["architectures"]):
                    exp += ["qa_outputs.weight", "qa_outputs.bias"]
            else:
                pre = entry["tensor_prefix"]
                exp = [pre + k for k in expected_bert_names(cfg, entry["has_pooler"])]
                if any(a.endswith("ForQuestionAnswering") for a in cfg["architectures"]):
                    exp += ["qa_outputs.weight", "qa_outputs.bias"]
                exp += entry.get("extra_tensors", [])
            c.ok(sorted(sd) == sorted(exp), f"{name}: tensor names differ: "
                 f"extra {sorted(set(sd) - set(exp))} missing {sorted(set(exp) - set(sd))}")
            shp = expected_shapes(cfg, exp)
            for k in exp:
                if k in sd:
                    c.ok(list(sd[k].shape) == shp[k], f"{name}: {k} shape {list(sd[k].shape)} != {shp[k]}")
            loaded[name] = sd

            # 1) functional reference forward on reloaded weights == reference.json
            m_exact = m_cross = 0.0
            for case in entry["cases"]:
                ids = torch.tensor(case["input_ids"])
                mask = torch.tensor(case["attention_mask"])
                tt = torch.tensor(case["token_type_ids"])
                o = rb.model_forward(sd, cfg, ids, mask, tt)
                for k in entry["outputs"]:
                    m_exact = max(m_exact, c.close(o[k], case[k], EXACT_TOL, f"{name}/{case['name']}/{k} reload"))
                c.ok(("pooler_output" in case) == entry["has_pooler"], f"{name}/{case['name']}: pooler presence")
                # pooled outputs in the json consistent with its last_hidden_state
                h = torch.tensor(case["last_hidden_state"])
                mf = mask.float().unsqueeze(-1)
                c.close((h * mf).sum(1) / mf.sum(1), case["mean_pooled"], 1e-6, f"{name}/{case['name']} mean_pooled")
                c.close(h[:, 0], case["cls_pooled"], 0, f"{name}/{case['name']} cls_pooled")

                # 2) second implementation
                if cfg["model_type"] in ("mpnet", "electra"):
                    pass  # the nn.Module is BERT's; these are checked by the functional reference alone
                elif cfg["model_type"] == "distilbert":
                    bcfg, bsd = distil_as_bert(sd, cfg)
                    mod = rb.build_module(bcfg, bsd, pooler=False)
                    hh, _ = mod(ids, mask, torch.zeros_like(ids))
                    m_cross = max(m_cross, c.close(hh, case["last_hidden_state"], CROSS_TOL,
                                                   f"{name}/{case['name']} nn.Module(mapped)"))
                else:
                    if entry["weights_file"].endswith(".pt"):
                        hh, pp = sm(ids, mask, tt)
                        m_cross = max(m_cross, c.close(hh, case["last_hidden_state"], CROSS_TOL,
                                                       f"{name}/{case['name']} TorchScript forward"))
                        m_cross = max(m_cross, c.close(pp, case["pooler_output"], CROSS_TOL,
                                                       f"{name}/{case['name']} TorchScript pooler"))
                    pre = entry["tensor_prefix"]
                    body = {k[len(pre):] if pre and k.startswith(pre) else k: v for k, v in sd.items()
                            if not k.startswith(("cls.", "qa_outputs.", "lm_head."))}
                    mod = rb.build_module(cfg, body, pooler=entry["has_pooler"])
                    hh, pp = mod(ids, mask, tt)
                    m_cross = max(m_cross, c.close(hh, case["last_hidden_state"], CROSS_TOL,
                                                   f"{name}/{case['name']} nn.Module"))
                    if entry["has_pooler"]:
                        m_cross = max(m_cross, c.close(pp, case["pooler_output"], CROSS_TOL,
                                                       f"{name}/{case['name']} nn.Module pooler"))
                    if "start_logits" in entry["outputs"]:
                        lg = hh @ sd["qa_outputs.weight"].T + sd["qa_outputs.bias"]
                        m_cross = max(m_cross, c.close(lg[..., 0], case["start_logits"], CROSS_TOL,
                                                       f"{name}/{case['name']} start_logits"))
                        m_cross = max(m_cross, c.close(lg[..., 1], case["end_logits"], CROSS_TOL,
                                                       f"{name}/{case['name']} end_logits"))
            # padding must not influence the valid positions: row 1 of max_length_and_short alone
            case = [cs for cs in entry["cases"] if cs["name"] == "max_length_and_short"][0]
            L1 = sum(case["attention_mask"][1])
            o1 = rb.model_forward(sd, cfg, torch.tensor([case["input_ids"][1][:L1]]),
                                  torch.ones(1, L1, dtype=torch.long), torch.tensor([case["token_type_ids"][1][:L1]]))
            c.close(o1["last_hidden_state"][0], torch.tensor(case["last_hidden_state"][1][:L1]), CROSS_TOL,
                    f"{name}: padded row == unpadded row")
            print(f"  {name:22s} {len(sd):3d} tensors, {len(entry['cases'])} cases: "
                  f"reload max|diff| {m_exact:.2e}, 2nd impl max|diff| {m_cross:.2e}")

        # TorchScript parameters == bert-tiny safetensors (names and values, exact)
        ts, base = loaded.get("bert-tiny-torchscript"), loaded.get("bert-tiny")
        if ts is not None and base is not None:
            c.ok(sorted(ts) == sorted(base), "TorchScript named_parameters names == bert-tiny names")
            c.ok(all(torch.equal(ts[k], base[k]) for k in base if k in ts), "TorchScript values == bert-tiny values")
            print("  TorchScript named_parameters == bert-tiny (names and values)")
        # prefixed / f16 / bf16 hold bert-tiny's weights
        if "bert-tiny-prefixed" in loaded:
            p = loaded["bert-tiny-prefixed"]
            c.ok(all(torch.equal(p["bert." + k], v) for k, v in base.items()), "prefixed weights == bert-tiny")
        for nm, dt in (("bert-tiny-f16", torch.float16), ("bert-tiny-bf16", torch.bfloat16)):
            if nm in loaded:
                r = loaded[nm]
                c.ok(all(torch.equal(r[k], v.to(dt).float()) for k, v in base.items()),
                     f"{nm} weights == bert-tiny rounded to {dt}")
                dmax = max((r[k] - v).abs().max().item() for k, v in base.items())
                print(f"  {nm}: == bert-tiny rounded to {dt} (max rounding error {dmax:.2e})")
        # attention vs torch's own MHA
        if base is not None:
            with open(os.path.join(out, "bert-tiny", "config.json")) as f:
                bcfg = json.load(f)
            e = [m for m in ref["models"] if m["model"] == "bert-tiny"][0]
            dm = max(check_mha(c, base, bcfg, cs) for cs in e["cases"])
            print(f"  attention == F.multi_head_attention_forward (max|diff| {dm:.2e})")
        # outputs are not degenerate
        e = [m for m in ref["models"] if m["model"] == "bert-tiny"][0]
        h = torch.tensor(e["cases"][0]["last_hidden_state"])
        c.ok(h.std().item() > 0.3, "bert-tiny outputs not degenerate")
        f16 = [m for m in ref["models"] if m["model"] == "bert-tiny-f16"]
        if f16:
            dd = (torch.tensor(f16[0]["cases"][0]["last_hidden_state"]) - h).abs().max().item()
            c.ok(dd > 0, "f16 reference differs from f32 reference")
            print(f"  f16 vs f32 reference outputs max|diff| {dd:.2e}")

    dt = time.perf_counter() - t0
    if c.failures:
        print(f"[check_reference] FAILED {len(c.failures)}/{c.n} checks in {dt:.2f} s")
        return 1
    print(f"[check_reference] OK: {c.n} checks passed in {dt:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
