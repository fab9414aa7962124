// The texts every tokenizer parity test compares on: the FAQ's own texts,
// a few edge cases, then random and adversarial strings from a fixed seed
// (mixed scripts, emoji sequences, combining marks, compatibility forms,
// white space runs, control characters, contractions, digits, special
// tokens and byte-fallback names inside text).
'use strict';

// A small deterministic generator (mulberry32).
function generator(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pieces = [
  ...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789',
  ' ', ' ', ' ', '  ', '   ', '\t', '\n', '\r\n', '\u00a0', '\u3000', '\u2028', '\u200b', '\u0085',
  "'", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", '"', '.', ',', '!', '?', '-', '_', '(', ')', '#', '@',
  '$', '+', '<', '=', '>', '^', '`', '|', '~', '…', '—', '«', '»', '¿',
  'é', 'ü', 'ñ', 'ß', 'İ', 'ﬁ', 'ﬀ', 'ŉ', 'ǅ', 'Å', '\u212b', 'e\u0301', 'a\u0308', '\u0301', '\u0323\u0301',
  'a\u0301\u0323', 'ạ́', 'o\u0302\u0300', 'ｆｕｌｌ', 'ﾊﾝｶｸ', '①', '㍿', '\u1100\u1161\u11a8', '각', 'ᄀ',
  '中', '文', '如何', '重置', '密码', 'の', 'カタカナ', 'ガ', 'か\u3099', '한국어', 'Ελληνικά', 'ΣΑΣ', 'кириллица',
  'العربية', 'עברית', 'हिन्दी', 'क्षि', 'ไทย', 'ق\u0651\u064e',
  '😀', '👍🏽', '👨‍👩‍👧', '🇯🇵', '❤️', '\u{1F600}\u{1F601}', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
  '\u0000', '\u0001', '\u001f', '\u007f', '\ufeff', '\ufffd', '\u{10ffff}', '\u{e000}', '\u00ad', '\u200d',
  '٣', '½', '²', 'Ⅻ', '१२३', '2024', '3.14', '1,000',
  '<s>', '</s>', '<pad>', '<unk>', '<mask>', ' <mask>', '<mask> ', '  <mask>', '<s', 'mask>', '[CLS]', '[UNK]',
  '<0x41>', '▁', '▁▁', ' ▁', '##', '##a',
  'password', ' password', 'order', ' reset', 'How', ' do', ' I', 'Passwords', 'RESET', 'réinitialiser',
];

function parityTexts(faqTexts, randomCount) {
  const random = generator(1234);
  const pick = (items) => items[Math.floor(random() * items.length)];
  const texts = [...faqTexts, '', ' ', '  ', 'a', ' a', 'a ', "it's", " it's", '<mask>', ' <mask> '];
  for (let i = 0; i < randomCount; ++i) {
    const n = 1 + Math.floor(random() * 12);
    let s = '';
    for (let k = 0; k < n; ++k) s += pick(pieces);
    texts.push(s);
  }
  return texts;
}

module.exports = { parityTexts };
