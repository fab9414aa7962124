#!/usr/bin/env node
// Markdown tables from run.sh's JSON lines: node table.js RESULTS.jsonl
// Per round each side's figure is the mean latency over a >= 2 s timed window (Google
// Benchmark's real_time for rapidqa, ms_mean for ORT); the tables show the median over rounds
// and the rounds' spread ((max - min) / median). Ratios are ORT / rapidqa: above 1, rapidqa leads.
//   1. the grid: FP32 (ORT's fused graph) and INT8 (every layer; rapidqa's auto beside it)
//   2. competing load: each side quiet and with one busy thread, and its slowdown
//   3. the ragged batch of real question lengths
'use strict';
const fs = require('fs');
const rows = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
const median = (xs) => { const s = [...xs].sort((p, q) => p - q); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
const RAGGED = new Set(['ort-ragged', 'rapidqa-ragged']);
const points = [];
const by = new Map();
const ragged = new Map();
for (const r of rows) {
  if (RAGGED.has(r.impl)) {
    if (!ragged.has(r.shape)) ragged.set(r.shape, {});
    (ragged.get(r.shape)[r.impl] ||= []).push(r);
    continue;
  }
  const p = `${r.shape}|${r.batch}|${r.seq}`;
  if (!by.has(p)) { by.set(p, {}); points.push(p); }
  (by.get(p)[r.impl] ||= []).push(r.ms);
  if (r.min_cosine !== undefined && r.min_cosine !== null) (by.get(p)[r.impl + '-cosine'] ||= []).push(r.min_cosine);
}
const f = (xs) => (xs && xs.length ? median(xs) : null);
const ms = (v) => (v === null ? '–' : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const ratio = (a, b) => (a === null || b === null ? '–' : (a / b).toFixed(2));
const bf16 = (m) => {
  const v = f(m['rapidqa-bf16']);
  if (v === null) return '–';
  const c = m['rapidqa-bf16-cosine'];
  return c && c.length ? `${ms(v)} (${Math.min(...c).toFixed(5)})` : ms(v);
};
const spread = (xs) => (xs && xs.length > 1 ? `${(100 * (Math.max(...xs) - Math.min(...xs)) / median(xs)).toFixed(0)}%` : '–');

console.log('| shape | batch | seq | rapidqa FP32 ms | ORT FP32 ms | ORT / rapidqa | rapidqa INT8 ms | ORT INT8 ms | ORT / rapidqa INT8 | rapidqa INT8 auto ms | rapidqa BF16 ms (cosine to FP32) | ORT plain-graph ms | rounds | spread rapidqa FP32 / ORT |');
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const p of points) {
  const [shape, batch, seq] = p.split('|');
  const m = by.get(p);
  if (!m['rapidqa-fp32'] && !m['ort-fused']) continue;
  const rq = f(m['rapidqa-fp32']), ort = f(m['ort-fused']);
  const rqa = f(m['rapidqa-int8-auto']), rqall = f(m['rapidqa-int8-all']), oi8 = f(m['ort-int8']);
  const rounds = Math.max(...Object.entries(m).filter(([k]) => !k.endsWith('-cosine')).map(([, x]) => x.length));
  console.log(`| ${shape} | ${batch} | ${seq} | ${ms(rq)} | ${ms(ort)} | ${ratio(ort, rq)} | ${ms(rqall)} | ${ms(oi8)} | ` +
    `${ratio(oi8, rqall)} | ${ms(rqa)} | ${bf16(m)} | ${ms(f(m['ort-plain']))} | ${rounds} | ${spread(m['rapidqa-fp32'])} / ${spread(m['ort-fused'])} |`);
}

const busy = points.filter((p) => by.get(p)['rapidqa-fp32-busy'] || by.get(p)['ort-fused-busy']);
if (busy.length) {
  console.log('\nWith one busy competing thread (a spinning process started and stopped around each measurement):\n');
  console.log('| shape | batch | seq | rapidqa quiet ms | rapidqa busy ms | rapidqa slowdown | ORT quiet ms | ORT busy ms | ORT slowdown | ORT / rapidqa under load |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const p of busy) {
    const [shape, batch, seq] = p.split('|');
    const m = by.get(p);
    const rq = f(m['rapidqa-fp32']), rqb = f(m['rapidqa-fp32-busy']), ort = f(m['ort-fused']), ortb = f(m['ort-fused-busy']);
    console.log(`| ${shape} | ${batch} | ${seq} | ${ms(rq)} | ${ms(rqb)} | ${ratio(rqb, rq)}x | ${ms(ort)} | ${ms(ortb)} | ` +
      `${ratio(ortb, ort)}x | ${ratio(ortb, rqb)} |`);
  }
}

if (ragged.size) {
  console.log('\nA ragged batch of 32 real question lengths (the bundled FAQ), padded to the longest with its mask; rapidqa packs the tokens:\n');
  console.log('| shape | tokens / padded | rapidqa ms | ORT ms (same padded batch) | ORT / rapidqa | rounds |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const [shape, m] of ragged) {
    const rq = m['rapidqa-ragged'] || [], ort = m['ort-ragged'] || [];
    const label = rq.length ? rq[0].label || '' : '';
    const lengths = label.includes('lengths=') ? label.replace(/.*lengths=/, '').split(',').map(Number) : [];
    const tokens = lengths.reduce((p, q) => p + q, 0), padded = lengths.length * Math.max(0, ...lengths);
    const a = f(rq.map((r) => r.ms)), b = f(ort.map((r) => r.ms));
    console.log(`| ${shape} | ${tokens} / ${padded} | ${ms(a)} | ${ms(b)} | ${ratio(b, a)} | ${Math.max(rq.length, ort.length)} |`);
  }
}
