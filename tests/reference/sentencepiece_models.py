#!/usr/bin/env python3
"""Sentencepiece models for the tokenizer parity tests, with Debian's
python3-sentencepiece (the same library rapidqa links) as the reference.

  sentencepiece_models.py train OUTDIR FAQ_JSONL
      Trains on the FAQ's texts:
        spm-unigram/sentencepiece.bpe.model  a Unigram model with
            sentencepiece's default normalization (nmt_nfkc), as XLM-RoBERTa
            ships it; beside it the tokenizer.json Hugging Face's converter
            makes of such a model (Precompiled character map, trailing
            spaces stripped, runs of spaces replaced, Metaspace, Unigram
            with XLM-RoBERTa's ids: <s> <pad> </s> <unk> first, <mask> last)
        spm-bpe/spiece.model  a BPE model with byte fallback and digits
            split, no normalization (as Llama's), and two user-defined
            pieces (kept whole, never merged)
  sentencepiece_models.py expected OUTDIR TEXTS_JSONL
      For each model above, OUTDIR/<name>/expected_spm.jsonl: one
      {"text", "ids", "offsets"} per text of TEXTS_JSONL (one JSON string
      per line), ids as the model numbers its pieces and offsets as
      [begin, end) code points of the text, as the library's Python
      binding reports them.
"""
import base64
import json
import os
import sys

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as model_pb2


def faq_texts(path):
    texts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                entry = json.loads(line)
                texts += [entry["question"], *entry.get("alternates", []), entry["answer"]]
    return texts


def xlm_roberta_tokenizer_json(model_path):
    """The tokenizer.json Hugging Face's XLM-RoBERTa converter makes of a
    sentencepiece Unigram model."""
    proto = model_pb2.ModelProto()
    with open(model_path, "rb") as f:
        proto.ParseFromString(f.read())
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    vocab = [[s, 0.0] for s in specials] + [[p.piece, p.score] for p in proto.pieces[3:]] + [["<mask>", 0.0]]
    mask_id = len(vocab) - 1

    def added(i, content, lstrip=False):
        return {"id": i, "content": content, "single_word": False, "lstrip": lstrip, "rstrip": False,
                "normalized": False, "special": True}

    def special(name, type_id=0):
        return {"SpecialToken": {"id": name, "type_id": type_id}}

    def sequence(name, type_id=0):
        return {"Sequence": {"id": name, "type_id": type_id}}

    charsmap = base64.b64encode(proto.normalizer_spec.precompiled_charsmap).decode("ascii")
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(i, s) for i, s in enumerate(specials)] + [added(mask_id, "<mask>", lstrip=True)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": charsmap},
            {"type": "Strip", "strip_left": False, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "\u2581"}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special("<s>"), sequence("A"), special("</s>")],
            "pair": [special("<s>"), sequence("A"), special("</s>"), special("</s>"), sequence("B"), special("</s>")],
            "special_tokens": {n: {"id": n, "ids": [specials.index(n)], "tokens": [n]} for n in ["<s>", "</s>"]},
        },
        "decoder": None,
        "model": {"type": "Unigram", "unk_id": 3, "vocab": vocab, "byte_fallback": False},
    }


MODELS = {
    "spm-unigram": ("sentencepiece.bpe.model",
                    dict(model_type="unigram", vocab_size=1500, character_coverage=0.9995)),
    "spm-bpe": ("spiece.model",
                dict(model_type="bpe", vocab_size=1500, byte_fallback=True, split_digits=True,
                     normalization_rule_name="identity", character_coverage=0.9995,
                     user_defined_symbols=["<mask>", "[CLS]"])),
}


def train(out_dir, faq_path):
    texts = faq_texts(faq_path)
    corpus = os.path.join(out_dir, "spm-corpus.txt")
    os.makedirs(out_dir, exist_ok=True)
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(texts) + "\n")
    for name, (file_name, options) in MODELS.items():
        model_dir = os.path.join(out_dir, name)
        os.makedirs(model_dir, exist_ok=True)
        prefix = os.path.join(model_dir, "model")
        spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, minloglevel=2, hard_vocab_limit=False,
                                       **options)
        os.replace(prefix + ".model", os.path.join(model_dir, file_name))
        os.remove(prefix + ".vocab")
    with open(os.path.join(out_dir, "spm-unigram", "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(xlm_roberta_tokenizer_json(os.path.join(out_dir, "spm-unigram", "sentencepiece.bpe.model")), f,
                  ensure_ascii=False)
    print(f"trained {', '.join(MODELS)} under {out_dir}")


def expected(out_dir, texts_path):
    with open(texts_path, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    for name, (file_name, _) in MODELS.items():
        processor = spm.SentencePieceProcessor(model_file=os.path.join(out_dir, name, file_name))
        with open(os.path.join(out_dir, name, "expected_spm.jsonl"), "w", encoding="utf-8") as out:
            for text in texts:
                encoded = processor.encode(text, out_type="immutable_proto")
                out.write(json.dumps({"text": text, "ids": [p.id for p in encoded.pieces],
                                      "offsets": [[p.begin, p.end] for p in encoded.pieces]}) + "\n")
    print(f"wrote {len(texts)} texts for {', '.join(MODELS)} under {out_dir}")


def main(argv):
    if len(argv) >= 2 and argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(argv) == 4 and argv[1] == "train":
        train(argv[2], argv[3])
        return 0
    if len(argv) == 4 and argv[1] == "expected":
        expected(argv[2], argv[3])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
