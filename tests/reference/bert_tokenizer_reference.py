#!/usr/bin/env python3
"""Independent reference for tests/wordpiece_test.cpp.

A small re-implementation of Hugging Face's slow BertTokenizer
(PreTrainedTokenizer.tokenize + BasicTokenizer + WordpieceTokenizer), written
from the behaviour it documents and using only Python's unicodedata and str
methods, so that the expected ids in the C++ test do not come from the C++
code under test.

HF behaviour followed here:
  * special tokens ([UNK] [SEP] [PAD] [CLS] [MASK]) found anywhere in the text
    are cut out first and stay whole; with do_lower_case the rest of the text
    is lower-cased one character at a time (str.lower on single characters)
    before anything else;
  * clean_text: drop U+0000, U+FFFD and every category C* character except
    tab, newline and carriage return; those three, space and Zs become " ";
  * spaces around CJK ideographs; NFC; str.split();
  * per token (unless it is a special token): lower() and, unless
    strip_accents is False, NFD and drop Mn; split on punctuation (ASCII
    33-47, 58-64, 91-96, 123-126 and categories P*);
  * WordPiece: greedy longest match first, "##" continuation, more than
    max_input_chars_per_word characters or any unmatched rest -> [UNK];
  * pairs: longest_first truncation, one token at a time from the longer
    side, ties from the second.

Offsets are rapidqa's own addition (the slow HF tokenizer has none): each
normalised character keeps the byte range of the original character(s) it
came from; characters NFC composes share the range of the whole composed run.

Usage: /usr/bin/python3 tests/reference/bert_tokenizer_reference.py
prints, for every test case, C++ initialisers to paste into the test.
"""
import unicodedata

VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "the", "a", "is", "i", "l", "of", "in", "un", "##aff", "##able",
    "##s", "##ly", "##ing", "##e", "##world", "hello", "world", "Hello",
    "cafe", "café", "Café", "naive", "naïve", "ecole", "école", "love",
    "bert", "token", "##izer", "##ize", "what", "where", "capital",
    "france", "paris", "question", "answer", "run", "##n", "mask", "5",
    "!", ",", ".", "?", "'", "-", "$", "(", ")", "[", "]",
    "我", "爱", "北", "京", "天", "安", "门", "中", "国", "，", "。", "？",
]

SPECIALS = ["[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"]


def is_whitespace(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def nfc(s):
    return unicodedata.normalize("NFC", s)


class Reference:
    def __init__(self, vocab, lower_case=True, strip_accents=None, chinese=True,
                 max_chars=100, prefix="##"):
        self.vocab = {t: i for i, t in enumerate(vocab)}
        self.lower_case = lower_case
        self.strip_accents = strip_accents
        self.chinese = chinese
        self.max_chars = max_chars
        self.prefix = prefix
        self.specials = [s for s in SPECIALS if s in self.vocab]

    # A character stream is a list of [char, begin_byte, end_byte].
    def _nfc_aligned(self, token):
        text = "".join(c for c, _, _ in token)
        if nfc(text) == text:
            return token
        # Segments start at each character of combining class 0; neighbours
        # merge while NFC of the pair differs from the NFC of each half.
        segments = []
        for item in token:
            if not segments or unicodedata.combining(item[0]) == 0:
                segments.append([item])
            else:
                segments[-1].append(item)
        groups = [segments[0]]
        for seg in segments[1:]:
            a = "".join(c for c, _, _ in groups[-1])
            b = "".join(c for c, _, _ in seg)
            if nfc(a + b) == nfc(a) + nfc(b):
                groups.append(seg)
            else:
                groups[-1] = groups[-1] + seg
        if "".join(nfc("".join(c for c, _, _ in g)) for g in groups) != nfc(text):
            groups = [token]
        out = []
        for g in groups:
            g_text = "".join(c for c, _, _ in g)
            if nfc(g_text) == g_text:
                out.extend(g)
            else:
                b, e = min(x[1] for x in g), max(x[2] for x in g)
                out.extend([c, b, e] for c in nfc(g_text))
        return out

    def _lower(self, token):
        out = [[l, b, e] for c, b, e in token for l in c.lower()]
        assert "".join(c for c, _, _ in out) == "".join(c for c, _, _ in token).lower()
        return out

    def _strip_accents(self, token):
        out = [[d, b, e] for c, b, e in token for d in unicodedata.normalize("NFD", c)]
        # Canonical ordering: stable sort of each run of non-starters.
        i = 0
        while i < len(out):
            if unicodedata.combining(out[i][0]) == 0:
                i += 1
                continue
            j = i
            while j < len(out) and unicodedata.combining(out[j][0]) != 0:
                j += 1
            out[i:j] = sorted(out[i:j], key=lambda x: unicodedata.combining(x[0]))
            i = j
        assert "".join(c for c, _, _ in out) == unicodedata.normalize(
            "NFD", "".join(c for c, _, _ in token))
        return [x for x in out if unicodedata.category(x[0]) != "Mn"]

    def _basic(self, stream):
        if self.lower_case:
            stream = [[l, b, e] for c, b, e in stream for l in c.lower()]
        cleaned = []
        for c, b, e in stream:
            if ord(c) == 0 or ord(c) == 0xFFFD or is_control(c):
                continue
            if is_whitespace(c):
                cleaned.append([" ", b, e])
            elif self.chinese and is_cjk(ord(c)):
                cleaned += [[" ", b, e], [c, b, e], [" ", b, e]]
            else:
                cleaned.append([c, b, e])
        words, cur = [], []
        for item in cleaned + [[" ", 0, 0]]:
            if item[0].isspace():
                if cur:
                    words.append(cur)
                cur = []
            else:
                cur.append(item)
        tokens = []
        for word in words:
            word = self._nfc_aligned(word)
            text = "".join(c for c, _, _ in word)
            if text in self.specials:
                tokens.append(word)
                continue
            if self.lower_case:
                word = self._lower(word)
            if (self.lower_case and self.strip_accents is not False) or self.strip_accents:
                word = self._strip_accents(word)
            cur = []
            for item in word:
                if is_punctuation(item[0]):
                    if cur:
                        tokens.append(cur)
                    tokens.append([item])
                    cur = []
                else:
                    cur.append(item)
            if cur:
                tokens.append(cur)
        return tokens

    def _wordpiece(self, token):
        chars = [c for c, _, _ in token]
        whole = (min(x[1] for x in token), max(x[2] for x in token))
        if len(chars) > self.max_chars:
            return [("[UNK]", whole)]
        pieces, start = [], 0
        while start < len(chars):
            end, found = len(chars), None
            while start < end:
                sub = "".join(chars[start:end])
                if start > 0:
                    sub = self.prefix + sub
                if sub in self.vocab:
                    found = sub
                    break
                end -= 1
            if found is None:
                return [("[UNK]", whole)]
            span = token[start:end]
            pieces.append((found, (min(x[1] for x in span), max(x[2] for x in span))))
            start = end
        return pieces

    def tokenize(self, text):
        """[(token, (begin_byte, end_byte))] for one text, no [CLS]/[SEP]."""
        stream, pos = [], 0
        for c in text:
            n = len(c.encode("utf-8"))
            stream.append([c, pos, pos + n])
            pos += n
        out, seg, i = [], [], 0
        while i < len(stream):
            rest = text[i:]
            hit = next((s for s in self.specials if rest.startswith(s)), None)
            if hit is None:
                seg.append(stream[i])
                i += 1
                continue
            for tok in self._basic(seg):
                out += self._wordpiece(tok)
            seg = []
            out.append((hit, (stream[i][1], stream[i + len(hit) - 1][2])))
            i += len(hit)
        for tok in self._basic(seg):
            out += self._wordpiece(tok)
        return out

    def ids(self, pieces):
        return [self.vocab[t] for t, _ in pieces]

    def encode(self, text, max_length):
        a = self.tokenize(text)[: max_length - 2]
        return self._assemble(a, None)

    def encode_pair(self, first, second, max_length):
        a, b = self.tokenize(first), self.tokenize(second)
        for _ in range(max(0, len(a) + len(b) + 3 - max_length)):
            if len(a) > len(b):
                a = a[:-1]
            else:
                b = b[:-1]
        return self._assemble(a, b)

    def _assemble(self, a, b):
        cls, sep = ("[CLS]", (0, 0)), ("[SEP]", (0, 0))
        toks = [cls] + a + [sep]
        types = [0] * len(toks)
        seq = [-1] + [0] * len(a) + [-1]
        if b is not None:
            toks += b + [sep]
            types += [1] * (len(b) + 1)
            seq += [1] * len(b) + [-1]
        return {"ids": self.ids(toks), "types": types, "seq": seq,
                "offsets": [o for _, o in toks], "tokens": [t for t, _ in toks]}


def cpp_string(s):
    out = '"'
    for ch in s:
        cp = ord(ch)
        if ch in '"\\':
            out += "\\" + ch
        elif cp < 0x20 or cp == 0x7F or unicodedata.category(ch) in ("Cf", "Zl", "Zp", "Co", "Cn") \
                or ch in "\u00a0\u3000\ufffd":
            out += '" "' + "".join("\\x%02X" % b for b in ch.encode("utf-8")) + '" "'
        else:
            out += ch
    out = (out + '"').replace(' "" ', " ")
    if out.startswith('"" "') and len(out) > 4:
        out = out[3:]
    if out.endswith('" ""') and len(out) > 4:
        out = out[:-3]
    return out


def show(name, ref, text, second=None, max_length=None):
    print("//", name, cpp_string(text), "" if second is None else cpp_string(second))
    if max_length is None:
        pieces = ref.tokenize(text)
        print("  tokens:", "{" + ", ".join(cpp_string(t) for t, _ in pieces) + "}")
        print("  ids:", "{" + ", ".join(str(i) for i in ref.ids(pieces)) + "}")
        print("  offsets:", "{" + ", ".join("{%d, %d}" % o for _, o in pieces) + "}")
        print("  slices:", "{" + ", ".join(
            cpp_string(text.encode()[b:e].decode("utf-8", "replace")) for _, (b, e) in pieces) + "}")
        return
    enc = ref.encode(text, max_length) if second is None else ref.encode_pair(text, second, max_length)
    print("  tokens:", "{" + ", ".join(cpp_string(t) for t in enc["tokens"]) + "}")
    print("  ids:", "{" + ", ".join(map(str, enc["ids"])) + "}")
    print("  token_type_ids:", "{" + ", ".join(map(str, enc["types"])) + "}")
    print("  sequence_ids:", "{" + ", ".join(map(str, enc["seq"])) + "}")
    print("  offsets:", "{" + ", ".join("{%d, %d}" % o for o in enc["offsets"]) + "}")


def main():
    uncased = Reference(VOCAB)
    cased = Reference(VOCAB, lower_case=False, strip_accents=False)
    keep_accents = Reference(VOCAB, lower_case=True, strip_accents=False)
    cased_strip = Reference(VOCAB, lower_case=False, strip_accents=True)
    short_words = Reference(VOCAB, max_chars=9)

    show("english", uncased, "Hello, world! The question is unaffable.")
    show("wordpieces", uncased, "unaffable tokenizer tokenize runs running")
    show("chinese", uncased, "我爱北京天安门")
    show("mixed", uncased, "I love 北京，bert tokenizer!中国?")
    show("accents_uncased", uncased, "Café naïve")
    show("accents_cased", cased, "Café naïve")
    show("accents_lower_keep", keep_accents, "Café naïve")
    show("accents_cased_strip", cased_strip, "Café naïve")
    show("decomposed_uncased", uncased, "Cafe\u0301 nai\u0308ve")
    show("decomposed_cased", cased, "Cafe\u0301 nai\u0308ve")
    show("ecole", uncased, "À l'ÉCOLE")
    show("dotted_capital_i", uncased, "İ love")
    show("dotted_capital_i_keep_accents", keep_accents, "İ love")
    show("emoji", uncased, "hello 😀 world hello😀")
    show("control", uncased, "hel\x00lo\x07 wor\u200bld\ufffd \x1b[5")
    show("whitespace", uncased, "\thello\u00a0world\u3000the\r\nworld\u2028is\u2029a")
    show("specials", uncased, "[MASK] is a [UNK] hello[SEP]world [mask] [CLS")
    show("specials_cased", cased, "[MASK] Hello[PAD]")
    show("special_after_cleaning", cased, "[CLS\u200b]")
    show("long_word_default", uncased, "a" * 101 + " hello")
    show("long_word_short_limit", short_words, "unaffable unaffables")
    show("punctuation", uncased, "$5 (run) the-world's")
    show("encode", uncased, "Hello, world!", max_length=32)
    show("encode_truncated", uncased, "Hello, world! The question", max_length=5)
    show("pair", uncased, "What is the capital of France?", "Paris is the capital of France.",
         max_length=64)
    # first has 7 tokens, second 4.
    show("pair_trunc_first", uncased, "what is the capital of france ?", "paris is the capital",
         max_length=11)
    show("pair_trunc_both", uncased, "what is the capital of france ?", "paris is the capital",
         max_length=8)
    show("pair_trunc_tie", uncased, "hello world", "the world", max_length=6)
    show("empty", uncased, "", max_length=8)
    print("// vocab size", len(VOCAB))


if __name__ == "__main__":
    main()
