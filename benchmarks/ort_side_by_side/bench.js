#!/usr/bin/env node
// ONNX Runtime (onnxruntime-node, CPU EP) side of the ORT-vs-rapidqa anchor.
//
//   node bench.js time   --model M.onnx --batch B --seq S [--shape NAME] [--runs 10] [--min-time 2]
//                        [--warmup 3] [--threads 2] [--seed 7] [--lengths L1,L2,...]
//       random token ids in [1000, 29000) (as rapidqa-bench), all-ones attention mask, zero
//       token types; --lengths gives a ragged batch instead (one sequence per length, padded
//       to the longest, the attention mask marking the padding: what ORT is given for a real
//       batch); 3 warm-up runs, then timed runs until both --runs and --min-time are
//       reached; prints one JSON line {shape, batch, seq, ms_median, ms_min, runs, ms_mean, ...}
//       (ms_mean over the timed window is what Google Benchmark's real_time reports).
//   node bench.js ops    --model M.onnx [--save OPT.onnx]
//       builds the session with optimizedModelFilePath, then counts the node types of the
//       graph ORT actually runs (Attention, SkipLayerNormalization, BiasGelu, ...).
//   node bench.js encode --model M.onnx [--pooling mean|cls] < lines of JSON id lists
//       one mean-pooled last_hidden_state per line (same format as refbert.py encode).
//
// Session options everywhere: intraOpNumThreads=--threads (2), interOpNumThreads=1,
// graphOptimizationLevel 'all', executionMode 'sequential'; --spin 0|1 sets
// session.intra_op.allow_spinning (left at ORT's default, 1, unless given).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require('onnxruntime-node');

function parseArgs(argv) {
  const a = { _: [] };
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i].startsWith('--')) {
      const k = argv[i].slice(2);
      const v = i + 1 < argv.length && !argv[i + 1].startsWith('--') ? argv[++i] : true;
      a[k] = v;
    } else a._.push(argv[i]);
  }
  return a;
}

function sessionOptions(a, more = {}) {
  const o = {
    intraOpNumThreads: +(a.threads || 2),
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
  };
  // --spin 0|1: session.intra_op.allow_spinning (ORT's default is 1: idle pool threads spin).
  if (a.spin !== undefined) o.extra = { session: { intra_op: { allow_spinning: String(a.spin) } } };
  return Object.assign(o, more);
}

// xorshift32, so runs are reproducible without depending on Math.random.
function rng(seed) {
  let s = (seed >>> 0) || 1;
  return () => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s; };
}

function feeds(ids2d, lengths) {
  const B = ids2d.length, S = ids2d[0].length;
  const ids = new BigInt64Array(B * S), mask = new BigInt64Array(B * S), tt = new BigInt64Array(B * S);
  for (let b = 0; b < B; ++b) {
    for (let s = 0; s < S; ++s) {
      const token = !lengths || s < lengths[b];
      ids[b * S + s] = token ? BigInt(ids2d[b][s]) : 0n;
      mask[b * S + s] = token ? 1n : 0n;
    }
  }
  return {
    input_ids: new ort.Tensor('int64', ids, [B, S]),
    attention_mask: new ort.Tensor('int64', mask, [B, S]),
    token_type_ids: new ort.Tensor('int64', tt, [B, S]),
  };
}

const median = (xs) => { const s = [...xs].sort((p, q) => p - q); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };

async function cmdTime(a) {
  const lengths = a.lengths ? String(a.lengths).split(',').map(Number) : null;
  if (lengths && !lengths.every((l) => l > 0)) throw new Error('--lengths takes positive integers');
  const B = lengths ? lengths.length : +a.batch, S = lengths ? Math.max(...lengths) : +a.seq, threads = +(a.threads || 2);
  if (!(B > 0 && S > 0)) throw new Error('time needs --batch and --seq, or --lengths');
  const runs = +(a.runs || 10), minTime = +(a['min-time'] ?? 2), warmup = +(a.warmup ?? 3);
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(a.model, sessionOptions(a));
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const r = rng(+(a.seed || 7));
  const ids = Array.from({ length: B }, () => Array.from({ length: S }, () => 1000 + (r() % 28000)));
  const f = feeds(ids, lengths);
  for (let i = 0; i < warmup; ++i) await session.run(f);
  const times = [];
  const start = process.hrtime.bigint();
  const cap = Math.max(runs, 10000);
  while (times.length < cap) {
    const t = process.hrtime.bigint();
    await session.run(f);
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
    if (times.length >= runs && Number(process.hrtime.bigint() - start) / 1e9 >= minTime) break;
  }
  await session.release();
  console.log(JSON.stringify({
    shape: a.shape || path.basename(a.model, '.onnx'), batch: B, seq: S,
    ms_median: +median(times).toFixed(3), ms_min: +Math.min(...times).toFixed(3), runs: times.length,
    ms_mean: +(times.reduce((p, q) => p + q, 0) / times.length).toFixed(3),
    threads, spin: a.spin === undefined ? 'default' : String(a.spin), ort: ort.env.versions.node, load_ms: +loadMs.toFixed(0),
  }));
}

// --- minimal protobuf reader: ModelProto.graph(7) -> GraphProto.node(1) -> NodeProto op_type(4), domain(7)
function readVarint(buf, pos) {
  let result = 0n, shift = 0n, b;
  do { b = buf[pos++]; result |= BigInt(b & 0x7f) << shift; shift += 7n; } while (b & 0x80);
  return [result, pos];
}
function fields(buf, start, end, want) {  // yields [fieldNo, subStart, subEnd] for length-delimited fields in `want`
  const out = [];
  let pos = start;
  while (pos < end) {
    let key; [key, pos] = readVarint(buf, pos);
    const fno = Number(key >> 3n), wt = Number(key & 7n);
    if (wt === 0) { [, pos] = readVarint(buf, pos); }
    else if (wt === 1) pos += 8;
    else if (wt === 5) pos += 4;
    else if (wt === 2) {
      let len; [len, pos] = readVarint(buf, pos); len = Number(len);
      if (want.includes(fno)) out.push([fno, pos, pos + len]);
      pos += len;
    } else throw new Error(`unsupported wire type ${wt}`);
  }
  return out;
}
function countOps(file) {
  const buf = fs.readFileSync(file);
  const counts = {};
  for (const [, gs, ge] of fields(buf, 0, buf.length, [7])) {
    for (const [, ns, ne] of fields(buf, gs, ge, [1])) {
      let op = '', domain = '';
      for (const [fno, s, e] of fields(buf, ns, ne, [4, 7])) {
        const v = buf.toString('utf8', s, e);
        if (fno === 4) op = v; else domain = v;
      }
      const k = (domain && domain !== 'ai.onnx' ? domain + '.' : '') + op;
      counts[k] = (counts[k] || 0) + 1;
    }
  }
  return counts;
}

async function cmdOps(a) {
  const out = a.save || path.join(os.tmpdir(), `ort-opt-${process.pid}.onnx`);
  const session = await ort.InferenceSession.create(a.model, sessionOptions(a, { optimizedModelFilePath: out }));
  await session.release();
  const before = countOps(a.model), after = countOps(out);
  if (!a.save) fs.unlinkSync(out);
  const fused = ['com.microsoft.Attention', 'com.microsoft.MultiHeadAttention', 'com.microsoft.SkipLayerNormalization',
    'com.microsoft.EmbedLayerNormalization', 'com.microsoft.BiasGelu', 'com.microsoft.FastGelu', 'com.microsoft.Gelu',
    'LayerNormalization', 'com.microsoft.FusedMatMul', 'com.microsoft.BiasSoftmax'];
  const sum = (c) => Object.values(c).reduce((p, q) => p + q, 0);
  console.log(JSON.stringify({
    model: a.model, ort: ort.env.versions.node, nodes_before: sum(before), nodes_after: sum(after),
    fused: Object.fromEntries(fused.map((k) => [k, after[k] || 0])), after,
  }));
}

async function cmdEncode(a) {
  const session = await ort.InferenceSession.create(a.model, sessionOptions(a));
  const lines = fs.readFileSync(0, 'utf8').split('\n').filter((l) => l.trim());
  for (const line of lines) {
    const ids = JSON.parse(line);
    const out = (await session.run(feeds([ids]))).last_hidden_state;
    const [, S, H] = out.dims;
    const v = new Array(H).fill(0);
    if (a.pooling === 'cls') for (let h = 0; h < H; ++h) v[h] = out.data[h];
    else { for (let s = 0; s < S; ++s) for (let h = 0; h < H; ++h) v[h] += out.data[s * H + h]; for (let h = 0; h < H; ++h) v[h] /= S; }
    console.log(JSON.stringify(v.map((x) => +x.toFixed(7))));
  }
  await session.release();
}

(async () => {
  const a = parseArgs(process.argv.slice(2));
  const cmd = a._[0];
  if (!a.model || !['time', 'ops', 'encode'].includes(cmd)) {
    console.error('usage: node bench.js time|ops|encode --model M.onnx [...]  (see the header of bench.js)');
    process.exit(2);
  }
  await ({ time: cmdTime, ops: cmdOps, encode: cmdEncode })[cmd](a);
})().catch((e) => { console.error(e); process.exit(1); });
