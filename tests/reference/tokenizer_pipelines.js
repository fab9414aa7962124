#!/usr/bin/env node
// Trains WordPiece, Unigram and BPE tokenizers on the FAQ with Hugging
// Face's own tokenizers library (the npm package "tokenizers", the native
// binding of the Rust library), each behind the normalizers, pre-tokenizers
// and post-processors real checkpoints ship, and writes what the library
// makes of a set of texts, for the C++ parity test
// (tests/tokenizer_parity_test.cpp) to compare with rapidqa's.
//
//   node tokenizer_pipelines.js OUTDIR FAQ_JSONL [RANDOM_COUNT] [-- DIR...]
//
// Writes OUTDIR/<name>/tokenizer.json, OUTDIR/<name>/expected.jsonl (one
// {"text", "ids", "offsets"} per line; offsets in code points, as the
// library gives them) and expected_pairs.jsonl (the same for pairs) for:
//   wordpiece      NFD, Lowercase, StripAccents; Whitespace then single
//                  digits; BertProcessing
//   wordpiece-bert BertNormalizer and BertPreTokenizer, RobertaProcessing
//                  (MPNet's layout)
//   unigram        NFKC then runs of spaces replaced by one; Metaspace;
//                  <s> A </s> (XLM-RoBERTa's layout), <mask> with lstrip
//   unigram-bytes  NFC; numbers split off, Metaspace on the first piece
//                  only; byte fallback for what the pieces do not cover
//   spbpe          sentencepiece-style BPE as Llama ships it: Prepend and
//                  Replace of spaces by ▁, no pre-tokenizer, byte fallback,
//                  fused unknowns; <s> A
//   bpe-suffix     Lowercase, NFKD; white space removed, punctuation runs,
//                  a single-word added token; end-of-word suffix </w>
// and, for each DIR after "--" (tokenizer.json files made elsewhere, such
// as from a sentencepiece model), its expected.jsonl and
// expected_pairs.jsonl.
// The texts: every question, alternate and answer of the FAQ, then
// RANDOM_COUNT (100000) random and adversarial strings (parity_texts.js).
'use strict';
const fs = require('fs');
const path = require('path');
const tk = require('tokenizers');
const { parityTexts } = require('./parity_texts');

const args = process.argv.slice(2);
if (args[0] === '--help' || args.length < 2) {
  console.log('usage: node tokenizer_pipelines.js OUTDIR FAQ_JSONL [RANDOM_COUNT] [-- DIR...]');
  process.exit(args[0] === '--help' ? 0 : 2);
}
const dash = args.indexOf('--');
const extraDirs = dash >= 0 ? args.slice(dash + 1) : [];
const [outDir, faqPath, countArg] = dash >= 0 ? args.slice(0, dash) : args;
const randomCount = countArg ? Number(countArg) : 100000;

const entries = fs.readFileSync(faqPath, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const faqTexts = [];
for (const e of entries) faqTexts.push(e.question, ...(e.alternates || []), e.answer);
fs.mkdirSync(outDir, { recursive: true });
const corpus = path.join(outDir, 'pipelines-corpus.txt');
fs.writeFileSync(corpus, faqTexts.join('\n'));
const texts = parityTexts(faqTexts, randomCount);
// The same texts for the other references (sentencepiece_models.py).
fs.writeFileSync(path.join(outDir, 'texts.jsonl'), texts.map((t) => JSON.stringify(t)).join('\n') + '\n');

// Trains model on the FAQ behind the given normalizer and pre-tokenizer and
// returns the JSON the library saves.
function train(model, normalizer, preTokenizer) {
  const t = new tk.Tokenizer(model);
  if (normalizer) t.setNormalizer(normalizer);
  if (preTokenizer) t.setPreTokenizer(preTokenizer);
  t.train([corpus]);
  const file = path.join(outDir, 'pipelines-trained.json');
  t.save(file, false);
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

const added = (id, content, options = {}) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true, ...options,
});
const special = (id, typeId = 0) => ({ SpecialToken: { id, type_id: typeId } });
const sequence = (id, typeId = 0) => ({ Sequence: { id, type_id: typeId } });
const specialTokens = (vocabOf, names) =>
  Object.fromEntries(names.map((n) => [n, { id: n, ids: [vocabOf(n)], tokens: [n] }]));

// A {token: id} vocabulary: the given tokens first, then the learned ones
// in their order.
function vocabObject(first, learned) {
  const vocab = {};
  for (const t of first) if (!(t in vocab)) vocab[t] = Object.keys(vocab).length;
  for (const t of Object.entries(learned).sort((a, b) => a[1] - b[1]).map(([k]) => k)) {
    if (!(t in vocab)) vocab[t] = Object.keys(vocab).length;
  }
  return vocab;
}
const byteTokens = Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);

function build(name, json) {
  const dir = path.join(outDir, name);
  fs.mkdirSync(dir, { recursive: true });
  const text = JSON.stringify({ version: '1.0', truncation: null, padding: null, decoder: null, ...json });
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), text);
  return dir;
}

async function write(dir) {
  const tokenizer = tk.Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
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
  // Pairs: neighbouring texts, with their type ids and which text each
  // token came from.
  let lines = '';
  for (let i = 0; i + 1 < Math.min(texts.length, 2001); i += 2) {
    const e = await tokenizer.encode(texts[i], texts[i + 1]);
    lines += JSON.stringify({ text: texts[i], pair: texts[i + 1], ids: e.getIds(), type_ids: e.getTypeIds(),
                              offsets: e.getOffsets(), sequence_ids: e.getSequenceIds() }) + '\n';
  }
  fs.writeFileSync(path.join(dir, 'expected_pairs.jsonl'), lines);
}

(async () => {
  const dirs = [];

  // WordPiece behind separate normalizers and pre-tokenizers.
  const wpNormalizer = { type: 'Sequence', normalizers: [{ type: 'NFD' }, { type: 'Lowercase' }, { type: 'StripAccents' }] };
  const wpPre = { type: 'Sequence', pretokenizers: [{ type: 'Whitespace' }, { type: 'Digits', individual_digits: true }] };
  const wpTrained = train(tk.WordPiece.empty(),
                          tk.sequenceNormalizer([tk.nfdNormalizer(), tk.lowercase(), tk.stripAccentsNormalizer()]),
                          tk.sequencePreTokenizer([tk.whitespacePreTokenizer(), tk.digitsPreTokenizer(true)]));
  const bertSpecials = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];
  const wpVocab = vocabObject(bertSpecials, wpTrained.model.vocab);
  const wpModel = { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##',
                    max_input_chars_per_word: 100, vocab: wpVocab };
  dirs.push(build('wordpiece', {
    added_tokens: bertSpecials.map((t) => added(wpVocab[t], t)),
    normalizer: wpNormalizer, pre_tokenizer: wpPre,
    post_processor: { type: 'BertProcessing', sep: ['[SEP]', wpVocab['[SEP]']], cls: ['[CLS]', wpVocab['[CLS]']] },
    model: wpModel,
  }));
  // MPNet's layout over the same vocabulary.
  const mpSpecials = ['<s>', '<pad>', '</s>', '[UNK]', '<mask>'];
  const mpVocab = vocabObject(mpSpecials, wpTrained.model.vocab);
  dirs.push(build('wordpiece-bert', {
    added_tokens: mpSpecials.map((t) => added(mpVocab[t], t, t === '<mask>' ? { lstrip: true } : {})),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null,
                  lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: { type: 'RobertaProcessing', sep: ['</s>', mpVocab['</s>']], cls: ['<s>', mpVocab['<s>']],
                      trim_offsets: true, add_prefix_space: false },
    model: { ...wpModel, vocab: mpVocab },
  }));

  // Unigram as XLM-RoBERTa ships it.
  const ugNormalizer = { type: 'Sequence', normalizers: [{ type: 'NFKC' },
                         { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' }] };
  const metaspace = { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true };
  const ugTrained = train(tk.Unigram.empty(), tk.nfkcNormalizer(), tk.metaspacePreTokenizer('\u2581', 'always', true));
  const xlmSpecials = ['<s>', '<pad>', '</s>', '<unk>'];
  const learnedPieces = ugTrained.model.vocab.filter(([p]) => !xlmSpecials.includes(p) && p !== '<mask>');
  const ugVocab = [...xlmSpecials.map((p) => [p, 0.0]), ...learnedPieces, ['<mask>', 0.0]];
  const ugId = (p) => ugVocab.findIndex(([q]) => q === p);
  dirs.push(build('unigram', {
    added_tokens: [...xlmSpecials.map((t) => added(ugId(t), t)), added(ugId('<mask>'), '<mask>', { lstrip: true })],
    normalizer: ugNormalizer, pre_tokenizer: metaspace,
    post_processor: {
      type: 'TemplateProcessing',
      single: [special('<s>'), sequence('A'), special('</s>')],
      pair: [special('<s>'), sequence('A'), special('</s>'), special('</s>'), sequence('B'), special('</s>')],
      special_tokens: specialTokens(ugId, ['<s>', '</s>']),
    },
    model: { type: 'Unigram', unk_id: ugId('<unk>'), vocab: ugVocab, byte_fallback: false },
  }));
  // Unigram with byte fallback, numbers split off, a prefix on the first piece only.
  const lowest = Math.min(...learnedPieces.map(([, s]) => s));
  const ubVocab = [['<unk>', 0.0], ...byteTokens.map((b) => [b, lowest - 1]), ...learnedPieces];
  dirs.push(build('unigram-bytes', {
    added_tokens: [added(0, '<unk>')],
    normalizer: { type: 'NFC' },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: '\\p{N}+' }, behavior: 'Isolated', invert: false },
      { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false }] },
    post_processor: null,
    model: { type: 'Unigram', unk_id: 0, vocab: ubVocab, byte_fallback: true },
  }));

  // Sentencepiece-style BPE as Llama ships it.
  const bpeTrained = train(tk.BPE.empty(), null, tk.metaspacePreTokenizer('\u2581', 'always', true));
  const llamaSpecials = ['<unk>', '<s>', '</s>'];
  const spVocab = vocabObject([...llamaSpecials, ...byteTokens], bpeTrained.model.vocab);
  dirs.push(build('spbpe', {
    added_tokens: llamaSpecials.map((t) => added(spVocab[t], t)),
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '\u2581' },
                  { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' }] },
    pre_tokenizer: null,
    post_processor: {
      type: 'TemplateProcessing',
      single: [special('<s>'), sequence('A')],
      pair: [special('<s>'), sequence('A'), special('<s>', 1), sequence('B', 1)],
      special_tokens: specialTokens((t) => spVocab[t], ['<s>']),
    },
    model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab: spVocab,
             merges: bpeTrained.model.merges },
  }));

  // BPE with an end-of-word suffix (as CLIP's), behind Lowercase and NFKD.
  const sfTrained = train(tk.BPE.init({}, [], { endOfWordSuffix: '</w>' }), tk.lowercase(),
                          tk.whitespaceSplitPreTokenizer());
  const sfVocab = vocabObject(['<unk>', '<|endoftext|>'], sfTrained.model.vocab);
  dirs.push(build('bpe-suffix', {
    added_tokens: [added(sfVocab['<unk>'], '<unk>'), added(sfVocab['<|endoftext|>'], '<|endoftext|>'),
                   added(sfVocab['password</w>'] ?? Object.keys(sfVocab).length, 'password',
                         { single_word: true, normalized: true, special: false })],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Lowercase' }, { type: 'NFKD' }] },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: '\\s+' }, behavior: 'Removed', invert: false },
      { type: 'Punctuation', behavior: 'Contiguous' }] },
    post_processor: null,
    model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null,
             end_of_word_suffix: '</w>', fuse_unk: false, byte_fallback: false, vocab: sfVocab,
             merges: sfTrained.model.merges },
  }));

  for (const dir of [...dirs, ...extraDirs]) await write(dir);
  console.log(`wrote ${texts.length} texts for ${[...dirs, ...extraDirs].map((d) => path.basename(d)).join(', ')}`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
