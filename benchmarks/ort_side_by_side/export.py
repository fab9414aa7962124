#!/usr/bin/python3
"""Random-weight BERT encoders for the ORT-vs-rapidqa anchor (Debian python3-torch 1.13).

    /usr/bin/python3 benchmarks/ort_side_by_side/export.py [--out DIR] [--shapes bert-base,minilm-l6]
                                                [--seed 1] [--opset 14]

For each shape writes, under DIR (default benchmarks/ort_side_by_side/models):
  <shape>/config.json, vocab.txt, model.safetensors   HF layout; rapidqa-encode and rapidqa-bench
                                                     (RAPIDQA_BENCH_MODELS=DIR) load it
  <shape>.onnx        plain graph: what torch.onnx.export makes of HF BertModel's computation
  <shape>.fused.onnx  the same weights as ORT contrib ops (EmbedLayerNormalization, Attention,
                      SkipLayerNormalization, BiasGelu): what onnxruntime.transformers.optimizer
                      would produce; ORT at its best in FP32
  <shape>.int8.onnx   the fused graph dynamically quantized as quantize_dynamic's defaults would
                      (QAttention, DynamicQuantizeMatMul; per-tensor symmetric int8 weights)
All three: dynamic batch/sequence axes, inputs input_ids / attention_mask / token_type_ids
(int64), output last_hidden_state [batch, seq, hidden]; no onnx python package needed.

Why the fused graph is written by hand: ORT's in-session optimizer (graphOptimizationLevel
'all') fuses only LayerNormalization, BiasGelu and the scaled Q.K^T MatMul in the plain graph;
its AttentionFusion needs constant Reshape shapes and its SkipLayerNormFusion needs a fixed
sequence length, so with a dynamic sequence axis neither applies. The offline Python optimizer
that does them (and quantize_dynamic) is pip-only, and pip is not reachable here.

Weights are seeded randn * 0.05, LayerNorm weight 1 + noise, at full size: vocab 30522,
512 positions. vocab.txt is a small word
list (so rapidqa's tokenizer yields real ids) padded with [unusedN] to 30522 lines.
After each export the script runs one sequence through the torch module
encode (an independent forward) and ONNX Runtime on the written file (bench.js encode), and
prints the differences (the int8 module's torch forward emulates the integer math).
"""
import argparse, json, math, os, subprocess, sys, tempfile, warnings
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = {  # layers, hidden, heads, intermediate
    'bert-base': (12, 768, 12, 3072),
    'minilm-l6': (6, 384, 12, 1536),
}
VOCAB, POSITIONS = 30522, 512


def write_safetensors(path, tensors):
    # safetensors, F32, header padded to 8 bytes.
    import struct
    header, off = {}, 0
    for name, t in tensors.items():
        n = t.numel() * 4
        header[name] = {'dtype': 'F32', 'shape': list(t.shape), 'data_offsets': [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h))); f.write(h)
        for t in tensors.values():
            f.write(t.detach().contiguous().to(torch.float32).numpy().tobytes())


def small_vocab():
    """A small WordPiece vocabulary (special tokens, letters, digits, CJK), padded to VOCAB."""
    words = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
    words += list('abcdefghijklmnopqrstuvwxyz0123456789') + ['##' + c for c in 'abcdefghijklmnopqrstuvwxyz0123456789']
    words += list('.,!?;:\'"()-/') + [chr(c) for c in range(0x4e00, 0x4e00 + 2000)]
    assert len(words) < VOCAB
    return words + [f'[unused{i}]' for i in range(VOCAB - len(words))]


def make_checkpoint(d, layers, hidden, heads, inter, seed, vocab_words):
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(seed)
    H, L, I, V, P = hidden, layers, inter, VOCAB, POSITIONS
    open(os.path.join(d, 'vocab.txt'), 'w', encoding='utf-8').write('\n'.join(vocab_words) + '\n')
    cfg = dict(architectures=['BertModel'], model_type='bert', hidden_size=H, num_hidden_layers=L,
               num_attention_heads=heads, intermediate_size=I, vocab_size=V, max_position_embeddings=P,
               type_vocab_size=2, hidden_act='gelu', layer_norm_eps=1e-12, pad_token_id=0)
    json.dump(cfg, open(os.path.join(d, 'config.json'), 'w'), indent=2)
    r = lambda *s: torch.randn(*s) * 0.05
    t = {'embeddings.word_embeddings.weight': r(V, H), 'embeddings.position_embeddings.weight': r(P, H),
         'embeddings.token_type_embeddings.weight': r(2, H),
         'embeddings.LayerNorm.weight': 1 + r(H), 'embeddings.LayerNorm.bias': r(H)}
    for l in range(L):
        p = f'encoder.layer.{l}.'
        for n in ('query', 'key', 'value'):
            t[p + f'attention.self.{n}.weight'] = r(H, H); t[p + f'attention.self.{n}.bias'] = r(H)
        t[p + 'attention.output.dense.weight'] = r(H, H); t[p + 'attention.output.dense.bias'] = r(H)
        t[p + 'attention.output.LayerNorm.weight'] = 1 + r(H); t[p + 'attention.output.LayerNorm.bias'] = r(H)
        t[p + 'intermediate.dense.weight'] = r(I, H); t[p + 'intermediate.dense.bias'] = r(I)
        t[p + 'output.dense.weight'] = r(H, I); t[p + 'output.dense.bias'] = r(H)
        t[p + 'output.LayerNorm.weight'] = 1 + r(H); t[p + 'output.LayerNorm.bias'] = r(H)
    t['pooler.dense.weight'] = r(H, H); t['pooler.dense.bias'] = r(H)
    write_safetensors(os.path.join(d, 'model.safetensors'), t)
    return cfg, t


# --- the module that is exported: HF BertModel's computation, parameter names = HF keys ---
class Embeddings(nn.Module):
    def __init__(self, V, P, H, eps):
        super().__init__()
        self.word_embeddings = nn.Embedding(V, H)
        self.position_embeddings = nn.Embedding(P, H)
        self.token_type_embeddings = nn.Embedding(2, H)
        self.LayerNorm = nn.LayerNorm(H, eps=eps)
        self.register_buffer('position_ids', torch.arange(P).expand((1, -1)), persistent=False)

    def forward(self, input_ids, token_type_ids):
        pos = self.position_ids[:, :input_ids.size(1)]
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(pos)
        return self.LayerNorm(x)


class SelfAttention(nn.Module):
    def __init__(self, H, A):
        super().__init__()
        self.A, self.d = A, H // A
        self.query, self.key, self.value = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)

    def split(self, x):
        return x.view(x.size()[:-1] + (self.A, self.d)).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q = self.split(self.query(x))
        k = self.split(self.key(x))
        v = self.split(self.value(x))
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d)
        s = s + mask
        p = nn.functional.softmax(s, dim=-1)
        c = torch.matmul(p, v).permute(0, 2, 1, 3).contiguous()
        return c.view(c.size()[:-2] + (self.A * self.d,))


class DenseLN(nn.Module):
    def __init__(self, i, H, eps):
        super().__init__()
        self.dense = nn.Linear(i, H)
        self.LayerNorm = nn.LayerNorm(H, eps=eps)

    def forward(self, h, residual):
        return self.LayerNorm(self.dense(h) + residual)


class Attention(nn.Module):
    def __init__(self, H, A, eps):
        super().__init__()
        self.self = SelfAttention(H, A)
        self.output = DenseLN(H, H, eps)

    def forward(self, x, mask):
        return self.output(self.self(x, mask), x)


class Intermediate(nn.Module):
    def __init__(self, H, I):
        super().__init__()
        self.dense = nn.Linear(H, I)

    def forward(self, x):
        return nn.functional.gelu(self.dense(x))  # erf GELU, as HF 'gelu'


class Layer(nn.Module):
    def __init__(self, H, A, I, eps):
        super().__init__()
        self.attention = Attention(H, A, eps)
        self.intermediate = Intermediate(H, I)
        self.output = DenseLN(I, H, eps)

    def forward(self, x, mask):
        a = self.attention(x, mask)
        return self.output(self.intermediate(a), a)


class Encoder(nn.Module):
    def __init__(self, L, H, A, I, eps):
        super().__init__()
        self.layer = nn.ModuleList([Layer(H, A, I, eps) for _ in range(L)])


class Bert(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, eps = cfg['hidden_size'], cfg['layer_norm_eps']
        self.embeddings = Embeddings(cfg['vocab_size'], cfg['max_position_embeddings'], H, eps)
        self.encoder = Encoder(cfg['num_hidden_layers'], H, cfg['num_attention_heads'], cfg['intermediate_size'], eps)

    def forward(self, input_ids, attention_mask, token_type_ids):
        mask = attention_mask[:, None, None, :].to(torch.float32)
        mask = (1.0 - mask) * -10000.0
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.encoder.layer:
            x = layer(x, mask)
        return x


# --- the same network as ONNX Runtime's contrib ops, i.e. what onnxruntime.transformers.optimizer
# (model_type bert) makes of the plain graph: EmbedLayerNormalization, then per layer Attention,
# MatMul, SkipLayerNormalization(bias), MatMul, BiasGelu, MatMul, SkipLayerNormalization(bias).
# That optimizer is pip-only (not reachable here), and ORT's in-session optimizer cannot fuse
# Attention/SkipLayerNormalization when the sequence axis is dynamic, so this graph is written
# directly. Each op is an autograd.Function whose forward is the torch math (for tracing) and
# whose symbolic emits the com.microsoft node.
def _typed(out, like):
    out.setType(like.type())
    return out


class _EmbedLN(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ids, seg, word, pos, segw, gamma, beta, eps):
        x = word[ids.long()] + pos[:ids.size(1)][None] + segw[seg.long()]
        return nn.functional.layer_norm(x, (x.size(-1),), gamma, beta, eps)

    @staticmethod
    def symbolic(g, ids, seg, word, pos, segw, gamma, beta, eps):
        out, _mask_index = g.op('com.microsoft::EmbedLayerNormalization', ids, seg, word, pos, segw, gamma, beta,
                                epsilon_f=eps, outputs=2)  # the schema requires the mask_index output slot
        return out


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b, mask, heads):
        B, S, H = x.shape
        d = H // heads
        q, k, v = (x @ w + b).split(H, dim=-1)
        sp = lambda t: t.reshape(B, S, heads, d).permute(0, 2, 1, 3)
        s = sp(q) @ sp(k).transpose(-1, -2) / math.sqrt(d) + (1.0 - mask.float())[:, None, None, :] * -10000.0
        return (s.softmax(-1) @ sp(v)).permute(0, 2, 1, 3).reshape(B, S, H)

    @staticmethod
    def symbolic(g, x, w, b, mask, heads):
        return _typed(g.op('com.microsoft::Attention', x, w, b, mask, num_heads_i=heads), x)


class _SkipLN(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, skip, gamma, beta, bias, eps):
        return nn.functional.layer_norm(x + skip + bias, (x.size(-1),), gamma, beta, eps)

    @staticmethod
    def symbolic(g, x, skip, gamma, beta, bias, eps):
        return _typed(g.op('com.microsoft::SkipLayerNormalization', x, skip, gamma, beta, bias, epsilon_f=eps), x)


class _BiasGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bias):
        return nn.functional.gelu(x + bias)

    @staticmethod
    def symbolic(g, x, bias):
        return _typed(g.op('com.microsoft::BiasGelu', x, bias), x)


class FusedBert(nn.Module):
    """Same weights as Bert, laid out as the contrib ops want them (W^T, QKV concatenated)."""

    def __init__(self, cfg, t):
        super().__init__()
        self.eps, self.A, L = cfg['layer_norm_eps'], cfg['num_attention_heads'], cfg['num_hidden_layers']
        P = lambda x: nn.Parameter(x.detach().clone().contiguous(), requires_grad=False)
        e = 'embeddings.'
        self.emb = nn.ParameterList([P(t[e + 'word_embeddings.weight']), P(t[e + 'position_embeddings.weight']),
                                     P(t[e + 'token_type_embeddings.weight']), P(t[e + 'LayerNorm.weight']),
                                     P(t[e + 'LayerNorm.bias'])])
        self.layers = nn.ModuleList()
        for l in range(L):
            p = f'encoder.layer.{l}.'
            s = p + 'attention.self.'
            m = nn.ParameterList([
                P(torch.cat([t[s + n + '.weight'].T for n in ('query', 'key', 'value')], 1)),
                P(torch.cat([t[s + n + '.bias'] for n in ('query', 'key', 'value')])),
                P(t[p + 'attention.output.dense.weight'].T), P(t[p + 'attention.output.dense.bias']),
                P(t[p + 'attention.output.LayerNorm.weight']), P(t[p + 'attention.output.LayerNorm.bias']),
                P(t[p + 'intermediate.dense.weight'].T), P(t[p + 'intermediate.dense.bias']),
                P(t[p + 'output.dense.weight'].T), P(t[p + 'output.dense.bias']),
                P(t[p + 'output.LayerNorm.weight']), P(t[p + 'output.LayerNorm.bias'])])
            self.layers.append(m)

    def forward(self, input_ids, attention_mask, token_type_ids):
        mask = attention_mask.to(torch.int32)
        x = _EmbedLN.apply(input_ids.to(torch.int32), token_type_ids.to(torch.int32), *self.emb, self.eps)
        for (wqkv, bqkv, wo, bo, g1, b1, wi, bi, wo2, bo2, g2, b2) in self.layers:
            a = _Attention.apply(x, wqkv, bqkv, mask, self.A)
            x = _SkipLN.apply(a @ wo, x, g1, b1, bo, self.eps)
            h = _BiasGelu.apply(x @ wi, bi)
            x = _SkipLN.apply(h @ wo2, x, g2, b2, bo2, self.eps)
        return x


# --- INT8: what onnxruntime.quantization.quantize_dynamic (defaults: per-tensor, symmetric int8
# weights, uint8 activations quantized at run time) makes of the fused graph, after ORT's
# in-session fusions: every MatMul -> DynamicQuantizeMatMul, Attention -> DynamicQuantizeLinear +
# QAttention; EmbedLayerNormalization, SkipLayerNormalization, BiasGelu stay FP32. (quantize_dynamic
# is pip-only too, so the graph is written directly.) The torch forward emulates the integer math
# (fake quantization), so the export-time check also exercises the quantization scheme.
def quantize_weight(w):
    """Symmetric per-tensor int8, as quantize_dynamic's default QInt8 weights: scale = absmax / 127."""
    scale = w.abs().max() / 127.0
    return torch.clamp(torch.round(w / scale), -127, 127).to(torch.int8), scale.reshape(())


def fake_dynamic_quant(x):
    """DynamicQuantizeLinear (uint8, range widened to include 0), then dequantized."""
    lo, hi = torch.clamp(x.min(), max=0.0), torch.clamp(x.max(), min=0.0)
    scale = (hi - lo) / 255.0
    zp = torch.clamp(torch.round(-lo / scale), 0, 255)
    return (torch.clamp(torch.round(x / scale) + zp, 0, 255) - zp) * scale


class _DQMatMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, wq, scale, zp):
        return fake_dynamic_quant(x) @ (wq.float() * scale)

    @staticmethod
    def symbolic(g, x, wq, scale, zp):
        return g.op('com.microsoft::DynamicQuantizeMatMul', x, wq, scale, zp)


class _QAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, wq, b, scale, zp, mask, heads):
        return _Attention.forward(ctx, fake_dynamic_quant(x), wq.float() * scale, b, mask, heads)

    @staticmethod
    def symbolic(g, x, wq, b, scale, zp, mask, heads):
        xq, xs, xzp = g.op('DynamicQuantizeLinear', x, outputs=3)
        return _typed(g.op('com.microsoft::QAttention', xq, wq, b, xs, scale, mask, xzp, zp, num_heads_i=heads), x)


class Int8Bert(FusedBert):
    def __init__(self, cfg, t):
        super().__init__(cfg, t)
        self.q = []
        for i, (wqkv, bqkv, wo, bo, g1, b1, wi, bi, wo2, bo2, g2, b2) in enumerate(self.layers):
            names = []
            for tag, w in (('qkv', wqkv), ('o', wo), ('i', wi), ('o2', wo2)):
                wq, s = quantize_weight(w.detach())
                self.register_buffer(f'l{i}_{tag}_w', wq)
                self.register_buffer(f'l{i}_{tag}_s', s)
                names.append((f'l{i}_{tag}_w', f'l{i}_{tag}_s'))
            self.q.append(names)
        self.register_buffer('zero_i8', torch.zeros((), dtype=torch.int8))

    def forward(self, input_ids, attention_mask, token_type_ids):
        mask = attention_mask.to(torch.int32)
        x = _EmbedLN.apply(input_ids.to(torch.int32), token_type_ids.to(torch.int32), *self.emb, self.eps)
        z = self.zero_i8
        for layer, names in zip(self.layers, self.q):
            (_, bqkv, _, bo, g1, b1, _, bi, _, bo2, g2, b2) = layer
            (qkv, o, i, o2) = [(getattr(self, w), getattr(self, s)) for w, s in names]
            a = _QAttention.apply(x, qkv[0], bqkv, qkv[1], z, mask, self.A)
            x = _SkipLN.apply(_DQMatMul.apply(a, o[0], o[1], z), x, g1, b1, bo, self.eps)
            h = _BiasGelu.apply(_DQMatMul.apply(x, i[0], i[1], z), bi)
            x = _SkipLN.apply(_DQMatMul.apply(h, o2[0], o2[1], z), x, g2, b2, bo2, self.eps)
        return x


def export(model, path, opset, custom):
    ids = torch.randint(1000, 29000, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    tt = torch.zeros(2, 16, dtype=torch.long)
    dyn = {n: {0: 'batch', 1: 'sequence'} for n in ('input_ids', 'attention_mask', 'token_type_ids', 'last_hidden_state')}
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask, tt), path, input_names=['input_ids', 'attention_mask', 'token_type_ids'],
                          output_names=['last_hidden_state'], dynamic_axes=dyn, opset_version=opset,
                          do_constant_folding=True, custom_opsets={'com.microsoft': 1} if custom else None)


def check(model, d, onnx_path):
    """One 37-token sequence through the torch module and ONNX Runtime on the exported file (bench.js encode, if node_modules is
    installed). Returns a one-line summary of the mean-pooled differences."""
    ids = [2] + list(range(5, 40)) + [3]
    line = json.dumps(ids) + '\n'
    with torch.no_grad():
        t = torch.tensor([ids])
        mine = model(t, torch.ones_like(t), torch.zeros_like(t))[0].mean(0)
    cos = lambda a, b: float(torch.nn.functional.cosine_similarity(a, b, dim=0))
    out = 'torch module'
    if os.path.isdir(os.path.join(HERE, 'node_modules', 'onnxruntime-node')):
        r = subprocess.run(['node', os.path.join(HERE, 'bench.js'), 'encode', '--model', onnx_path], input=line,
                           capture_output=True, text=True)
        if r.returncode == 0:
            ort = torch.tensor(json.loads(r.stdout.splitlines()[0]))
            out += f'; ORT vs torch module: max|diff| {float((ort - mine).abs().max()):.2e}, cos {cos(ort, mine):.6f}'
        else:
            out += f'; ORT FAILED: {r.stderr.strip().splitlines()[0] if r.stderr.strip() else r.returncode}'
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--out', default=os.path.join(HERE, 'models'))
    ap.add_argument('--shapes', default=','.join(SHAPES))
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--opset', type=int, default=14)
    ap.add_argument('--no-check', action='store_true', help='skip the ORT cross-check')
    a = ap.parse_args()
    torch.set_num_threads(2)
    warnings.filterwarnings('ignore')  # torch.onnx's notes on custom-domain shape inference
    vocab_words = small_vocab()
    for name in a.shapes.split(','):
        L, H, A, I = SHAPES[name]
        d = os.path.join(a.out, name)
        cfg, tensors = make_checkpoint(d, L, H, A, I, a.seed, vocab_words)
        model = Bert(cfg).eval()
        missing, unexpected = model.load_state_dict(tensors, strict=False)
        assert not missing and all(k.startswith('pooler.') for k in unexpected), (missing, unexpected)
        fused = FusedBert(cfg, tensors).eval()
        int8 = Int8Bert(cfg, tensors).eval()
        n = sum(t.numel() for t in tensors.values())
        print(f'{name}: wrote {d}/ ({n} parameters)', flush=True)
        for variant, m in (('plain', model), ('fused', fused), ('int8', int8)):
            path = os.path.join(a.out, name + ('.onnx' if variant == 'plain' else f'.{variant}.onnx'))
            export(m, path, a.opset, custom=variant != 'plain')
            msg = f'  {variant}: {path} ({os.path.getsize(path) / 1e6:.0f} MB, opset {a.opset})'
            if not a.no_check:
                msg += '\n    ' + check(m, d, path)
            print(msg, flush=True)

if __name__ == '__main__':
    main()
