"""Independent pure-PyTorch reference for BERT-family encoders (no `transformers`).

This module contains everything shared by tests/reference/make_tiny_models.py,
tests/reference/check_reference.py and benchmarks/python/*.py:

  * config helpers (Hugging Face field names),
  * a *functional* reference forward that works directly on a Hugging Face
    style state dict (``name -> tensor``) for BertModel, BertForQuestionAnswering
    and DistilBertModel -- written from the structure of HF's modeling_bert.py /
    modeling_distilbert.py, eval mode (no dropout),
  * an ``nn.Module`` implementation (``BertModel``) whose ``named_parameters()``
    carry exactly the HF names; used for TorchScript export and benchmarking and
    cross-checked against the functional forward,
  * a minimal safetensors writer/reader (F32 / F16 / BF16),
  * an independent BasicTokenizer + WordPiece (BERT uncased semantics).

Only torch, numpy and the Python standard library are used.
"""

from __future__ import annotations

import json
import math
import struct
import unicodedata
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

F32_MIN = float(torch.finfo(torch.float32).min)  # HF: (1 - mask) * finfo(dtype).min

# --------------------------------------------------------------------------
# Activations
# --------------------------------------------------------------------------


def gelu_erf(x: torch.Tensor) -> torch.Tensor:
    """HF "gelu": exact erf GELU."""
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """HF "gelu_new" / "gelu_pytorch_tanh": tanh approximation."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def activation(name: str, x: torch.Tensor) -> torch.Tensor:
    if name == "gelu":
        return gelu_erf(x)
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return gelu_tanh(x)
    if name == "relu":
        return torch.relu(x)
    raise ValueError(f"unsupported hidden_act {name!r}")


# --------------------------------------------------------------------------
# Configs (Hugging Face field names)
# --------------------------------------------------------------------------


def bert_config(vocab_size: int, hidden_size: int = 32, num_hidden_layers: int = 2,
                num_attention_heads: int = 4, intermediate_size: int = 64,
                max_position_embeddings: int = 64, type_vocab_size: int = 2,
                layer_norm_eps: float = 1e-12, hidden_act: str = "gelu",
                architectures: Optional[List[str]] = None) -> dict:
    return {
        "architectures": architectures or ["BertModel"],
        "model_type": "bert",
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "num_hidden_layers": num_hidden_layers,
        "num_attention_heads": num_attention_heads,
        "intermediate_size": intermediate_size,
        "hidden_act": hidden_act,
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": max_position_embeddings,
        "type_vocab_size": type_vocab_size,
        "initializer_range": 0.02,
        "layer_norm_eps": layer_norm_eps,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "use_cache": True,
        "classifier_dropout": None,
        "torch_dtype": "float32",
    }


ROBERTA_FAMILY = ("roberta", "xlm-roberta", "camembert", "mpnet")  # positions past the padding index


def roberta_config(vocab_size: int, model_type: str = "roberta", pad_token_id: int = 1,
                   architectures: Optional[List[str]] = None, **sizes) -> dict:
    """RoBERTa / XLM-R / CamemBERT: BERT's layout with one token type and positions past the padding index
    (max_position_embeddings = longest input + pad_token_id + 1, as roberta-base's 514)."""
    cfg = bert_config(vocab_size, type_vocab_size=1, **sizes)
    cfg["max_position_embeddings"] += pad_token_id + 1
    arch = {"roberta": "RobertaModel", "xlm-roberta": "XLMRobertaModel", "camembert": "CamembertModel"}[model_type]
    cfg.update({"model_type": model_type, "architectures": architectures or [arch], "pad_token_id": pad_token_id,
                "bos_token_id": 0, "eos_token_id": 2, "layer_norm_eps": 1e-5})
    return cfg


def electra_config(vocab_size: int, embedding_size: int = 16, **sizes) -> dict:
    """ElectraModel (a discriminator): BERT's layers over embeddings of their own, narrower width, projected up by
    embeddings_project; no pooler."""
    cfg = bert_config(vocab_size, **sizes)
    cfg.update({"model_type": "electra", "architectures": ["ElectraModel"], "embedding_size": embedding_size,
                "summary_type": "first", "summary_use_proj": True, "summary_activation": "gelu"})
    return cfg


def mpnet_config(vocab_size: int, relative_attention_num_buckets: int = 32, **sizes) -> dict:
    """MPNetModel: no token types, positions past the padding index, a relative position bias in attention."""
    cfg = roberta_config(vocab_size, **sizes)
    del cfg["type_vocab_size"]
    cfg.update({"model_type": "mpnet", "architectures": ["MPNetModel"],
                "relative_attention_num_buckets": relative_attention_num_buckets})
    return cfg


def random_electra_state_dict(cfg: dict, gen: torch.Generator, linear_std: float) -> Dict[str, torch.Tensor]:
    sd = random_bert_state_dict(cfg, gen, pooler=False, linear_std=linear_std)
    E, H = cfg["embedding_size"], cfg["hidden_size"]
    sd["embeddings.word_embeddings.weight"] = _normal(gen, (cfg["vocab_size"], E), 0.02)
    sd["embeddings.position_embeddings.weight"] = _normal(gen, (cfg["max_position_embeddings"], E), 0.02)
    sd["embeddings.token_type_embeddings.weight"] = _normal(gen, (cfg["type_vocab_size"], E), 0.02)
    _ln(gen, sd, "embeddings.LayerNorm", E)
    _linear(gen, sd, "embeddings_project", H, E, linear_std)
    return sd


def random_mpnet_state_dict(cfg: dict, gen: torch.Generator, linear_std: float) -> Dict[str, torch.Tensor]:
    H, I = cfg["hidden_size"], cfg["intermediate_size"]
    sd: Dict[str, torch.Tensor] = {}
    sd["embeddings.word_embeddings.weight"] = _normal(gen, (cfg["vocab_size"], H), 0.02)
    sd["embeddings.position_embeddings.weight"] = _normal(gen, (cfg["max_position_embeddings"], H), 0.02)
    _ln(gen, sd, "embeddings.LayerNorm", H)
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for n in ("q", "k", "v", "o"):
            _linear(gen, sd, p + "attention.attn." + n, H, H, linear_std)
        _ln(gen, sd, p + "attention.LayerNorm", H)
        _linear(gen, sd, p + "intermediate.dense", I, H, linear_std)
        _linear(gen, sd, p + "output.dense", H, I, linear_std)
        _ln(gen, sd, p + "output.LayerNorm", H)
    # Large enough that the bias moves attention visibly.
    sd["encoder.relative_attention_bias.weight"] = _normal(gen, (cfg["relative_attention_num_buckets"],
                                                                 cfg["num_attention_heads"]), 1.0)
    _linear(gen, sd, "pooler.dense", H, H, linear_std)
    return sd


def relative_position_bucket(relative_position: torch.Tensor, num_buckets: int = 32,
                             max_distance: int = 128) -> torch.Tensor:
    """Hugging Face MPNetEncoder.relative_position_bucket."""
    ret = 0
    n = -relative_position
    num_buckets //= 2
    ret += (n < 0).to(torch.long) * num_buckets
    n = torch.abs(n)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val_if_large = max_exact + (
        torch.log(n.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).to(torch.long)
    val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
    ret += torch.where(is_small, n, val_if_large)
    return ret


def mpnet_forward(sd: Dict[str, torch.Tensor], cfg: dict, input_ids: torch.Tensor,
                  attention_mask: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
    """HF MPNetModel forward (eval): the position bias is computed once over the padded length and added to every
    layer's scores before the mask."""
    sd = _strip_prefix(sd, "mpnet.")
    B, S = input_ids.shape
    if attention_mask is None:
        attention_mask = torch.ones(B, S, dtype=torch.long)
    H, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    hd = H // heads
    x = F.embedding(input_ids, sd["embeddings.word_embeddings.weight"]) + \
        F.embedding(position_ids(cfg, input_ids), sd["embeddings.position_embeddings.weight"])
    x = F.layer_norm(x, (H,), sd["embeddings.LayerNorm.weight"], sd["embeddings.LayerNorm.bias"], eps)
    context = torch.arange(S)[:, None]
    memory = torch.arange(S)[None, :]
    bucket = relative_position_bucket(memory - context, num_buckets=cfg["relative_attention_num_buckets"])
    bias = F.embedding(bucket, sd["encoder.relative_attention_bias.weight"]).permute(2, 0, 1).unsqueeze(0)
    ext = (1.0 - attention_mask.to(torch.float32))[:, None, None, :] * F32_MIN
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        g = lambda n: sd[p + n]  # noqa: E731

        def split(t):
            return t.view(B, S, heads, hd).permute(0, 2, 1, 3)

        q = split(F.linear(x, g("attention.attn.q.weight"), g("attention.attn.q.bias")))
        k = split(F.linear(x, g("attention.attn.k.weight"), g("attention.attn.k.bias")))
        v = split(F.linear(x, g("attention.attn.v.weight"), g("attention.attn.v.bias")))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd) + bias + ext
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous().view(B, S, H)
        o = F.linear(ctx, g("attention.attn.o.weight"), g("attention.attn.o.bias"))
        x = F.layer_norm(o + x, (H,), g("attention.LayerNorm.weight"), g("attention.LayerNorm.bias"), eps)
        h = activation(cfg["hidden_act"], F.linear(x, g("intermediate.dense.weight"), g("intermediate.dense.bias")))
        o = F.linear(h, g("output.dense.weight"), g("output.dense.bias"))
        x = F.layer_norm(o + x, (H,), g("output.LayerNorm.weight"), g("output.LayerNorm.bias"), eps)
    out = {"last_hidden_state": x}
    if "pooler.dense.weight" in sd:
        out["pooler_output"] = torch.tanh(F.linear(x[:, 0], sd["pooler.dense.weight"], sd["pooler.dense.bias"]))
    return out


def position_ids(cfg: dict, input_ids: torch.Tensor) -> torch.Tensor:
    """BERT: 0, 1, 2, ...; the RoBERTa family: counted over the ids that are not padding, from past the padding
    index (Hugging Face's create_position_ids_from_input_ids)."""
    B, S = input_ids.shape
    if cfg["model_type"] in ROBERTA_FAMILY:
        pad = cfg["pad_token_id"]
        mask = input_ids.ne(pad).long()
        return torch.cumsum(mask, dim=1) * mask + pad
    return torch.arange(S, dtype=torch.long)[None, :].expand(B, S)


def distilbert_config(vocab_size: int, dim: int = 32, n_layers: int = 2, n_heads: int = 4,
                      hidden_dim: int = 64, max_position_embeddings: int = 64,
                      activation_name: str = "gelu") -> dict:
    return {
        "architectures": ["DistilBertModel"],
        "model_type": "distilbert",
        "vocab_size": vocab_size,
        "dim": dim,
        "n_layers": n_layers,
        "n_heads": n_heads,
        "hidden_dim": hidden_dim,
        "activation": activation_name,
        "dropout": 0.1,
        "attention_dropout": 0.1,
        "max_position_embeddings": max_position_embeddings,
        "sinusoidal_pos_embds": False,
        "initializer_range": 0.02,
        "qa_dropout": 0.1,
        "seq_classif_dropout": 0.2,
        "pad_token_id": 0,
        "tie_weights_": True,
        "torch_dtype": "float32",
    }


# --------------------------------------------------------------------------
# Random weights with HF names
# --------------------------------------------------------------------------


def _normal(gen: torch.Generator, shape, std: float) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float32) * std


def _ln(gen, sd, name, n):
    # LayerNorm weight ~ 1 + small noise, bias small noise (so LN is not the identity)
    sd[name + ".weight"] = 1.0 + _normal(gen, (n,), 0.1)
    sd[name + ".bias"] = _normal(gen, (n,), 0.05)


def _linear(gen, sd, name, out_f, in_f, std=0.02, bias_std=0.02):
    sd[name + ".weight"] = _normal(gen, (out_f, in_f), std)  # HF/nn.Linear layout [out, in]
    sd[name + ".bias"] = _normal(gen, (out_f,), bias_std)


def random_bert_state_dict(cfg: dict, gen: torch.Generator, pooler: bool = True,
                           std: float = 0.02, linear_std: Optional[float] = None) -> Dict[str, torch.Tensor]:
    """BertModel state dict (unprefixed HF names), deterministic given `gen`.

    Embeddings use `std` (HF initializer_range, 0.02); Linear weights use
    `linear_std` (default: `std`). With hidden size 32, std 0.02 linears make
    attention almost uniform and the sub-layers ~1% of the residual, so
    make_tiny_models passes a larger linear_std to keep outputs sensitive to
    attention / masking / activation bugs. Linear biases are N(0, 0.02).
    """
    lstd = std if linear_std is None else linear_std
    H, I = cfg["hidden_size"], cfg["intermediate_size"]
    sd: Dict[str, torch.Tensor] = {}
    sd["embeddings.word_embeddings.weight"] = _normal(gen, (cfg["vocab_size"], H), std)
    sd["embeddings.position_embeddings.weight"] = _normal(gen, (cfg["max_position_embeddings"], H), std)
    sd["embeddings.token_type_embeddings.weight"] = _normal(gen, (cfg["type_vocab_size"], H), std)
    _ln(gen, sd, "embeddings.LayerNorm", H)
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for n in ("query", "key", "value"):
            _linear(gen, sd, p + "attention.self." + n, H, H, lstd)
        _linear(gen, sd, p + "attention.output.dense", H, H, lstd)
        _ln(gen, sd, p + "attention.output.LayerNorm", H)
        _linear(gen, sd, p + "intermediate.dense", I, H, lstd)
        _linear(gen, sd, p + "output.dense", H, I, lstd)
        _ln(gen, sd, p + "output.LayerNorm", H)
    if pooler:
        _linear(gen, sd, "pooler.dense", H, H, lstd)
    return sd


def random_distilbert_state_dict(cfg: dict, gen: torch.Generator, std: float = 0.02,
                                 linear_std: Optional[float] = None) -> Dict[str, torch.Tensor]:
    lstd = std if linear_std is None else linear_std
    D, Hd = cfg["dim"], cfg["hidden_dim"]
    sd: Dict[str, torch.Tensor] = {}
    sd["embeddings.word_embeddings.weight"] = _normal(gen, (cfg["vocab_size"], D), std)
    sd["embeddings.position_embeddings.weight"] = _normal(gen, (cfg["max_position_embeddings"], D), std)
    _ln(gen, sd, "embeddings.LayerNorm", D)
    for i in range(cfg["n_layers"]):
        p = f"transformer.layer.{i}."
        for n in ("q_lin", "k_lin", "v_lin", "out_lin"):
            _linear(gen, sd, p + "attention." + n, D, D, lstd)
        _ln(gen, sd, p + "sa_layer_norm", D)
        _linear(gen, sd, p + "ffn.lin1", Hd, D, lstd)
        _linear(gen, sd, p + "ffn.lin2", D, Hd, lstd)
        _ln(gen, sd, p + "output_layer_norm", D)
    return sd


def round_trip(sd: Dict[str, torch.Tensor], dtype: torch.dtype) -> Dict[str, torch.Tensor]:
    """Round every tensor to `dtype` (F16/BF16) and back to float32."""
    return {k: v.to(dtype).to(torch.float32) for k, v in sd.items()}


# --------------------------------------------------------------------------
# Functional reference forward (operates on a plain HF state dict)
# --------------------------------------------------------------------------


def _strip_prefix(sd: Dict[str, torch.Tensor], prefix: str) -> Dict[str, torch.Tensor]:
    if any(k.startswith(prefix) for k in sd):
        return {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}
    return sd


def _mha(x: torch.Tensor, mask: torch.Tensor, wq, bq, wk, bk, wv, bv, heads: int) -> torch.Tensor:
    """Multi-head self-attention as in HF BertSelfAttention (eval mode).

    x: [B, S, H]; mask: [B, S] of 0/1. Returns context [B, S, H] (before output dense).
    """
    B, S, H = x.shape
    hd = H // heads

    def split(t):  # [B,S,H] -> [B,heads,S,hd]
        return t.view(B, S, heads, hd).permute(0, 2, 1, 3)

    q = split(F.linear(x, wq, bq))
    k = split(F.linear(x, wk, bk))
    v = split(F.linear(x, wv, bv))
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
    ext = (1.0 - mask.to(torch.float32))[:, None, None, :] * F32_MIN  # [B,1,1,S]
    scores = scores + ext
    probs = torch.softmax(scores, dim=-1)
    ctx = torch.matmul(probs, v)  # [B,heads,S,hd]
    return ctx.permute(0, 2, 1, 3).contiguous().view(B, S, H)


def bert_forward(sd: Dict[str, torch.Tensor], cfg: dict, input_ids: torch.Tensor,
                 attention_mask: Optional[torch.Tensor] = None,
                 token_type_ids: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
    """HF BertModel / BertForQuestionAnswering forward on a (possibly 'bert.'-prefixed) state dict."""
    full = sd
    sd = _strip_prefix(sd, {"electra": "electra."}.get(cfg["model_type"],
                                                     "roberta." if cfg["model_type"] in ROBERTA_FAMILY else "bert."))
    B, S = input_ids.shape
    if attention_mask is None:
        attention_mask = torch.ones(B, S, dtype=torch.long)
    if token_type_ids is None:
        token_type_ids = torch.zeros(B, S, dtype=torch.long)
    eps = cfg["layer_norm_eps"]
    H = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    act = cfg["hidden_act"]

    pos = position_ids(cfg, input_ids)
    x = (F.embedding(input_ids, sd["embeddings.word_embeddings.weight"])
         + F.embedding(token_type_ids, sd["embeddings.token_type_embeddings.weight"])
         + F.embedding(pos, sd["embeddings.position_embeddings.weight"]))
    E = cfg.get("embedding_size", H)
    x = F.layer_norm(x, (E,), sd["embeddings.LayerNorm.weight"], sd["embeddings.LayerNorm.bias"], eps)
    if "embeddings_project.weight" in sd:  # ELECTRA
        x = F.linear(x, sd["embeddings_project.weight"], sd["embeddings_project.bias"])

    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        g = lambda n: sd[p + n]  # noqa: E731
        ctx = _mha(x, attention_mask,
                   g("attention.self.query.weight"), g("attention.self.query.bias"),
                   g("attention.self.key.weight"), g("attention.self.key.bias"),
                   g("attention.self.value.weight"), g("attention.self.value.bias"), heads)
        a = F.linear(ctx, g("attention.output.dense.weight"), g("attention.output.dense.bias"))
        x = F.layer_norm(a + x, (H,), g("attention.output.LayerNorm.weight"),
                         g("attention.output.LayerNorm.bias"), eps)
        h = activation(act, F.linear(x, g("intermediate.dense.weight"), g("intermediate.dense.bias")))
        o = F.linear(h, g("output.dense.weight"), g("output.dense.bias"))
        x = F.layer_norm(o + x, (H,), g("output.LayerNorm.weight"), g("output.LayerNorm.bias"), eps)

    out = {"last_hidden_state": x}
    if "pooler.dense.weight" in sd:
        out["pooler_output"] = torch.tanh(F.linear(x[:, 0], sd["pooler.dense.weight"], sd["pooler.dense.bias"]))
    if "qa_outputs.weight" in full:
        logits = F.linear(x, full["qa_outputs.weight"], full["qa_outputs.bias"])  # [B,S,2]
        out["start_logits"] = logits[..., 0]
        out["end_logits"] = logits[..., 1]
    return out


def distilbert_forward(sd: Dict[str, torch.Tensor], cfg: dict, input_ids: torch.Tensor,
                       attention_mask: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
    """HF DistilBertModel forward (eval). No token types, LayerNorm eps 1e-12 (hard-coded in HF)."""
    sd = _strip_prefix(sd, "distilbert.")
    B, S = input_ids.shape
    if attention_mask is None:
        attention_mask = torch.ones(B, S, dtype=torch.long)
    D, heads, eps = cfg["dim"], cfg["n_heads"], 1e-12
    pos = torch.arange(S, dtype=torch.long)[None, :].expand(B, S)
    x = F.embedding(input_ids, sd["embeddings.word_embeddings.weight"]) + \
        F.embedding(pos, sd["embeddings.position_embeddings.weight"])
    x = F.layer_norm(x, (D,), sd["embeddings.LayerNorm.weight"], sd["embeddings.LayerNorm.bias"], eps)
    hd = D // heads
    for i in range(cfg["n_layers"]):
        p = f"transformer.layer.{i}."
        g = lambda n: sd[p + n]  # noqa: E731

        def split(t):
            return t.view(B, S, heads, hd).transpose(1, 2)

        # HF MultiHeadSelfAttention: q scaled before the matmul, masked_fill(mask==0, finfo.min)
        q = split(F.linear(x, g("attention.q_lin.weight"), g("attention.q_lin.bias"))) / math.sqrt(hd)
        k = split(F.linear(x, g("attention.k_lin.weight"), g("attention.k_lin.bias")))
        v = split(F.linear(x, g("attention.v_lin.weight"), g("attention.v_lin.bias")))
        scores = torch.matmul(q, k.transpose(2, 3))
        m = (attention_mask == 0)[:, None, None, :].expand_as(scores)
        scores = scores.masked_fill(m, F32_MIN)
        w = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(w, v).transpose(1, 2).contiguous().view(B, S, D)
        sa = F.linear(ctx, g("attention.out_lin.weight"), g("attention.out_lin.bias"))
        sa = F.layer_norm(sa + x, (D,), g("sa_layer_norm.weight"), g("sa_layer_norm.bias"), eps)
        h = activation(cfg["activation"], F.linear(sa, g("ffn.lin1.weight"), g("ffn.lin1.bias")))
        o = F.linear(h, g("ffn.lin2.weight"), g("ffn.lin2.bias"))
        x = F.layer_norm(o + sa, (D,), g("output_layer_norm.weight"), g("output_layer_norm.bias"), eps)
    return {"last_hidden_state": x}


def model_forward(sd, cfg, input_ids, attention_mask, token_type_ids) -> Dict[str, torch.Tensor]:
    """Dispatch on cfg["model_type"] and add the pooled outputs."""
    if cfg["model_type"] == "distilbert":
        out = distilbert_forward(sd, cfg, input_ids, attention_mask)
    elif cfg["model_type"] == "mpnet":
        out = mpnet_forward(sd, cfg, input_ids, attention_mask)
    else:
        out = bert_forward(sd, cfg, input_ids, attention_mask, token_type_ids)
    h = out["last_hidden_state"]
    m = attention_mask.to(torch.float32).unsqueeze(-1)
    out["mean_pooled"] = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
    out["cls_pooled"] = h[:, 0]
    return out


# --------------------------------------------------------------------------
# nn.Module implementation with exact HF parameter names
# --------------------------------------------------------------------------


class BertEmbeddings(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        H = cfg["hidden_size"]
        self.word_embeddings = nn.Embedding(cfg["vocab_size"], H)
        self.position_embeddings = nn.Embedding(cfg["max_position_embeddings"], H)
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab_size"], H)
        self.LayerNorm = nn.LayerNorm(H, eps=cfg["layer_norm_eps"])
        self.roberta_positions: bool = cfg["model_type"] in ROBERTA_FAMILY
        self.padding_idx: int = cfg["pad_token_id"]

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        S = input_ids.size(1)
        if self.roberta_positions:
            real = input_ids.ne(self.padding_idx).long()
            pos = torch.cumsum(real, dim=1) * real + self.padding_idx
        else:
            pos = torch.arange(S, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        e = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids) \
            + self.position_embeddings(pos)
        return self.LayerNorm(e)


class BertSelfAttention(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        H = cfg["hidden_size"]
        self.num_heads = int(cfg["num_attention_heads"])
        self.head_dim = H // self.num_heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.query = nn.Linear(H, H)
        self.key = nn.Linear(H, H)
        self.value = nn.Linear(H, H)

    def forward(self, x: torch.Tensor, ext_mask: torch.Tensor) -> torch.Tensor:
        B, S, H = x.size(0), x.size(1), x.size(2)
        q = self.query(x).view(B, S, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        k = self.key(x).view(B, S, self.num_heads, self.head_dim).permute(0, 2, 3, 1)
        v = self.value(x).view(B, S, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        scores = torch.matmul(q, k) * self.scale + ext_mask
        probs = torch.softmax(scores, dim=-1)
        return torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(B, S, H)


class BertSelfOutput(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        H = cfg["hidden_size"]
        self.dense = nn.Linear(H, H)
        self.LayerNorm = nn.LayerNorm(H, eps=cfg["layer_norm_eps"])

    def forward(self, h: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(h) + residual)


class BertAttention(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        # HF names the submodule "self" -> parameter names "attention.self.query.weight".
        setattr(self, "self", BertSelfAttention(cfg))
        self.output = BertSelfOutput(cfg)

    def forward(self, x: torch.Tensor, ext_mask: torch.Tensor) -> torch.Tensor:
        sa = getattr(self, "self")
        return self.output(sa(x, ext_mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.dense = nn.Linear(cfg["hidden_size"], cfg["intermediate_size"])
        act = cfg["hidden_act"]
        if act not in ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu"):
            raise ValueError(f"unsupported hidden_act {act!r}")
        self.act_kind = 0 if act == "gelu" else (1 if act != "relu" else 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dense(x)
        if self.act_kind == 0:
            return F.gelu(h)  # exact erf
        if self.act_kind == 1:
            return F.gelu(h, approximate="tanh")
        return torch.relu(h)


class BertOutput(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        H = cfg["hidden_size"]
        self.dense = nn.Linear(cfg["intermediate_size"], H)
        self.LayerNorm = nn.LayerNorm(H, eps=cfg["layer_norm_eps"])

    def forward(self, h: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(h) + residual)


class BertLayer(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.attention = BertAttention(cfg)
        self.intermediate = BertIntermediate(cfg)
        self.output = BertOutput(cfg)

    def forward(self, x: torch.Tensor, ext_mask: torch.Tensor) -> torch.Tensor:
        a = self.attention(x, ext_mask)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(cfg) for _ in range(cfg["num_hidden_layers"])])

    def forward(self, x: torch.Tensor, ext_mask: torch.Tensor) -> torch.Tensor:
        for layer in self.layer:
            x = layer(x, ext_mask)
        return x


class BertPooler(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.dense = nn.Linear(cfg["hidden_size"], cfg["hidden_size"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(x[:, 0]))


class BertModel(nn.Module):
    """nn.Module BertModel; forward(input_ids, attention_mask, token_type_ids)
    -> (last_hidden_state [B,S,H], pooler_output [B,H] or empty [B,0] if no pooler)."""

    def __init__(self, cfg: dict, pooler: bool = True):
        super().__init__()
        self.embeddings = BertEmbeddings(cfg)
        self.encoder = BertEncoder(cfg)
        self.has_pooler = pooler
        self.pooler = BertPooler(cfg) if pooler else None

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        ext = (1.0 - attention_mask.to(torch.float32))[:, None, None, :] * -3.4028234663852886e38
        x = self.encoder(self.embeddings(input_ids, token_type_ids), ext)
        pooler = self.pooler
        if pooler is not None:
            return x, pooler(x)
        return x, x.new_zeros(x.size(0), 0)


def build_module(cfg: dict, sd: Optional[Dict[str, torch.Tensor]] = None, pooler: bool = True) -> BertModel:
    m = BertModel(cfg, pooler=pooler)
    if sd is not None:
        m.load_state_dict(sd, strict=True)
    return m.eval()


# --------------------------------------------------------------------------
# safetensors (written/read by hand)
# --------------------------------------------------------------------------

_ST_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
_ST_SIZES = {"F32": 4, "F16": 2, "BF16": 2}


def _tensor_bytes(t: torch.Tensor, st_dtype: str) -> bytes:
    t = t.detach().contiguous().cpu()
    if st_dtype == "F32":
        return t.to(torch.float32).numpy().astype("<f4").tobytes()
    if st_dtype == "F16":
        return t.to(torch.float16).numpy().astype("<f2").tobytes()
    if st_dtype == "BF16":
        return t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
    raise ValueError(st_dtype)


def write_safetensors(path: str, tensors: Dict[str, torch.Tensor], st_dtype: str = "F32",
                      metadata: Optional[Dict[str, str]] = None) -> None:
    """Write tensors (sorted by name, contiguous) with every tensor stored as st_dtype."""
    header: Dict[str, object] = {"__metadata__": dict(metadata or {"format": "pt"})}
    blobs: List[bytes] = []
    off = 0
    for name in sorted(tensors):
        b = _tensor_bytes(tensors[name], st_dtype)
        header[name] = {"dtype": st_dtype, "shape": list(tensors[name].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)


def read_safetensors(path: str) -> Tuple[Dict[str, torch.Tensor], Dict[str, str], Dict[str, str]]:
    """Returns (name -> float32 tensor, name -> stored dtype string, metadata). Validates layout."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    if n % 8 != 0:
        raise ValueError("header length not a multiple of 8")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    out: Dict[str, torch.Tensor] = {}
    dtypes: Dict[str, str] = {}
    spans = []
    for name, info in header.items():
        dt, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
        numel = int(np.prod(shape)) if shape else 1
        if e - b != numel * _ST_SIZES[dt]:
            raise ValueError(f"{name}: byte span {e - b} != {numel} * {_ST_SIZES[dt]}")
        spans.append((b, e))
        buf = data[b:e]
        if dt == "F32":
            t = torch.from_numpy(np.frombuffer(buf, dtype="<f4").copy())
        elif dt == "F16":
            t = torch.from_numpy(np.frombuffer(buf, dtype="<f2").astype(np.float32))
        elif dt == "BF16":
            t = torch.from_numpy(np.frombuffer(buf, dtype="<i2").copy()).view(torch.bfloat16).to(torch.float32)
        else:
            raise ValueError(f"unsupported dtype {dt}")
        out[name] = t.reshape(shape)
        dtypes[name] = dt
    spans.sort()
    pos = 0
    for b, e in spans:
        if b != pos:
            raise ValueError("tensor data not contiguous")
        pos = e
    if pos != len(data):
        raise ValueError("trailing bytes after tensor data")
    return out, dtypes, meta


# --------------------------------------------------------------------------
# BasicTokenizer + WordPiece (independent re-implementation, uncased)
# --------------------------------------------------------------------------


def _is_whitespace(c: str) -> bool:
    if c in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(c) == "Zs"


def _is_control(c: str) -> bool:
    if c in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(c) in ("Cc", "Cf")


def _is_punctuation(c: str) -> bool:
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_tokenize(text: str, lower_case: bool = True) -> List[str]:
    # clean text: drop NUL / U+FFFD / control chars, map whitespace to ' '
    cleaned = []
    for c in text:
        cp = ord(c)
        if cp == 0 or cp == 0xFFFD or _is_control(c):
            continue
        cleaned.append(" " if _is_whitespace(c) else c)
    text = "".join(cleaned)
    # pad CJK ideographs with spaces
    text = "".join(f" {c} " if _is_cjk(ord(c)) else c for c in text)
    out: List[str] = []
    for tok in text.strip().split():
        if lower_case:
            tok = tok.lower()
            tok = "".join(c for c in unicodedata.normalize("NFD", tok) if unicodedata.category(c) != "Mn")
        # split on punctuation
        cur = ""
        for c in tok:
            if _is_punctuation(c):
                if cur:
                    out.append(cur)
                    cur = ""
                out.append(c)
            else:
                cur += c
        if cur:
            out.append(cur)
    return [t for t in " ".join(out).split()]


def wordpiece(token: str, vocab: Dict[str, int], unk: str = "[UNK]", max_chars: int = 100) -> List[str]:
    if len(token) > max_chars:
        return [unk]
    pieces: List[str] = []
    start = 0
    while start < len(token):
        end = len(token)
        cur = None
        while start < end:
            sub = token[start:end]
            if start > 0:
                sub = "##" + sub
            if sub in vocab:
                cur = sub
                break
            end -= 1
        if cur is None:
            return [unk]
        pieces.append(cur)
        start = end
    return pieces


def load_vocab(path: str) -> Dict[str, int]:
    vocab: Dict[str, int] = {}
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            vocab[line.rstrip("\n")] = i
    return vocab


def encode(vocab: Dict[str, int], text: str, text_pair: Optional[str] = None) -> dict:
    def toks(s):
        return [p for w in basic_tokenize(s) for p in wordpiece(w, vocab)]

    a = toks(text)
    tokens = ["[CLS]"] + a + ["[SEP]"]
    type_ids = [0] * len(tokens)
    if text_pair is not None:
        b = toks(text_pair)
        tokens += b + ["[SEP]"]
        type_ids += [1] * (len(b) + 1)
    return {"tokens": tokens, "input_ids": [vocab[t] for t in tokens], "token_type_ids": type_ids}
