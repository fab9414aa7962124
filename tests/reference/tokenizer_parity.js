#!/usr/bin/env node
// Builds byte-level BPE tokenizers with Hugging Face's own tokenizers
// library (the npm package "tokenizers", the native binding of the Rust
// library) and writes what it makes of a set of texts, for the C++ parity
// test (tests/tokenizer_parity_test.cpp) to compare with rapidqa's.
//
//   node tokenizer_parity.js OUTDIR FAQ_JSONL [RANDOM_COUNT]
//
// Writes OUTDIR/<name>/tokenizer.json and OUTDIR/<name>/expected.jsonl
// (one {"text", "ids", "offsets"} per line; offsets in code points, as the
// library gives them) for:
//   roberta   trained on the FAQ, then RoBERTa's specials (<s> <pad> </s>
//             <unk> first, <mask> last with lstrip), every byte symbol,
//             RobertaProcessing; no prefix space; also as RoBERTa's older
//             vocab.json and merges.txt
//   gpt2      the same merges with a prefix space before every piece, the
//             ByteLevel post-processor, no specials
//   template  roberta's, its layout as a TemplateProcessing after ByteLevel
// The texts: every question, alternate and answer of the FAQ, then
// RANDOM_COUNT (100000) random and adversarial strings from a fixed seed.
'use strict';
const fs = require('fs');
const path = require('path');
const tk = require('tokenizers');
const { parityTexts } = require('./parity_texts');

const [outDir, faqPath, countArg] = process.argv.slice(2);
if (!outDir || !faqPath || outDir === '--help') {
  console.log('usage: node tokenizer_parity.js OUTDIR FAQ_JSONL [RANDOM_COUNT]');
  process.exit(outDir === '--help' ? 0 : 2);
}
const randomCount = countArg ? Number(countArg) : 100000;

const entries = fs.readFileSync(faqPath, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const faqTexts = [];
for (const e of entries) faqTexts.push(e.question, ...(e.alternates || []), e.answer);
fs.mkdirSync(outDir, { recursive: true });
const corpus = path.join(outDir, 'corpus.txt');
fs.writeFileSync(corpus, faqTexts.join('\n'));

const texts = parityTexts(faqTexts, randomCount);

// Train once on the FAQ; the JSON it saves is then rewritten into each
// variant, so both share the merges.
const trainer = new tk.Tokenizer(tk.BPE.empty());
trainer.setPreTokenizer(tk.byteLevelPreTokenizer(false, true));
trainer.train([corpus]);
const trainedFile = path.join(outDir, 'trained.json');
trainer.save(trainedFile, false);
const trained = JSON.parse(fs.readFileSync(trainedFile, 'utf8'));

// RoBERTa's layout: four specials first, the byte symbols the training did
// not meet, the learned tokens, <mask> last.
const specials = ['<s>', '<pad>', '</s>', '<unk>'];
const vocab = {};
for (const s of specials) vocab[s] = Object.keys(vocab).length;
for (const b of tk.byteLevelAlphabet()) if (!(b in vocab)) vocab[b] = Object.keys(vocab).length;
const learned = Object.entries(trained.model.vocab).sort((a, b) => a[1] - b[1]).map(([t]) => t);
for (const t of learned) if (!(t in vocab)) vocab[t] = Object.keys(vocab).length;
const maskId = Object.keys(vocab).length;
vocab['<mask>'] = maskId;
const addedTokens = [
  ...specials.map((s) => ({ id: vocab[s], content: s, single_word: false, lstrip: false, rstrip: false,
                             normalized: true, special: true })),
  { id: maskId, content: '<mask>', single_word: false, lstrip: true, rstrip: false, normalized: false, special: true },
];

function variant(name, config) {
  const json = {
    version: '1.0', truncation: null, padding: null,
    added_tokens: config.added_tokens,
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: config.add_prefix_space, trim_offsets: true, use_regex: true },
    post_processor: config.post_processor,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { ...trained.model, vocab, unk_token: null },
  };
  const dir = path.join(outDir, name);
  fs.mkdirSync(dir, { recursive: true });
  const text = JSON.stringify(json);
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), text);
  return { dir, tokenizer: tk.Tokenizer.fromString(text) };
}

async function write(dir, tokenizer) {
  const out = fs.openSync(path.join(dir, 'expected.jsonl'), 'w');
  const batch = 2000;
  for (let i = 0; i < texts.length; i += batch) {
    const slice = texts.slice(i, i + batch);
    const encodings = await tokenizer.encodeBatch(slice);
    let lines = '';
    encodings.forEach((e, k) => {
      lines += JSON.stringify({ text: slice[k], ids: e.getIds(), offsets: e.getOffsets() }) + '\n';
    });
    fs.writeSync(out, lines);
  }
  fs.closeSync(out);
}

(async () => {
  const roberta = variant('roberta', {
    added_tokens: addedTokens,
    add_prefix_space: false,
    post_processor: { type: 'RobertaProcessing', sep: ['</s>', vocab['</s>']], cls: ['<s>', vocab['<s>']],
                      trim_offsets: true, add_prefix_space: false },
  });
  await write(roberta.dir, roberta.tokenizer);
  // The same tokenizer as RoBERTa's older files: vocab.json and merges.txt.
  fs.writeFileSync(path.join(roberta.dir, 'vocab.json'), JSON.stringify(vocab));
  const mergeLines = trained.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m));
  fs.writeFileSync(path.join(roberta.dir, 'merges.txt'), '#version: 0.2\n' + mergeLines.join('\n') + '\n');
  const gpt2 = variant('gpt2', {
    added_tokens: [],
    add_prefix_space: true,
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  });
  await write(gpt2.dir, gpt2.tokenizer);
  // A layout written as a template, after ByteLevel's trimming (as newer
  // byte-level tokenizers ship it): <s> A </s>, and <s> A </s> B </s> with B
  // as type 1.
  const special = (id) => ({ SpecialToken: { id, type_id: 0 } });
  const template = variant('template', {
    added_tokens: addedTokens,
    add_prefix_space: false,
    post_processor: {
      type: 'Sequence',
      processors: [
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
        {
          type: 'TemplateProcessing',
          single: [special('<s>'), { Sequence: { id: 'A', type_id: 0 } }, special('</s>')],
          pair: [special('<s>'), { Sequence: { id: 'A', type_id: 0 } }, special('</s>'),
                 { Sequence: { id: 'B', type_id: 1 } }, { SpecialToken: { id: '</s>', type_id: 1 } }],
          special_tokens: {
            '<s>': { id: '<s>', ids: [vocab['<s>']], tokens: ['<s>'] },
            '</s>': { id: '</s>', ids: [vocab['</s>']], tokens: ['</s>'] },
          },
        },
      ],
    },
  });
  await write(template.dir, template.tokenizer);
  console.log(`wrote ${texts.length} texts for roberta, gpt2 and template under ${outDir}`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
