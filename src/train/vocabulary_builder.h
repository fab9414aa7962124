// A WordPiece vocabulary for a model trained from scratch on our own text:
// the BERT special tokens, every character the text uses (alone and as a
// "##" continuation, so no word ever becomes [UNK]) and the whole words it
// uses. Words come from WordPieceTokenizer::basic_tokens, so the ids the
// trainer feeds the model are the ids our runtime's tokenizer produces.
//
// Thread safety: free functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "rapidqa/status.h"
#include "text/wordpiece_tokenizer.h"

namespace rapidqa::train {

struct VocabularyOptions {
  bool lower_case = true;          // uncased, as BERT uncased (accents stripped too); saved as do_lower_case
  std::size_t min_word_count = 1;  // whole words: a word seen fewer times is spelled with character pieces
  // 0: whole words. N > 0: instead of whole words, up to N pieces learned
  // by merging the most frequent pair of adjacent pieces in the words
  // (byte-pair encoding over characters; a pair must occur twice), so
  // related words share pieces ("return", "return ##s") and a word seen
  // only in one form still meets its other forms.
  std::size_t subword_merges = 0;
};

// The special tokens every vocabulary starts with, at these ids:
// [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4.
const std::vector<std::string>& special_tokens();

// Specials, then single characters (by code point), then "##" characters,
// then words of two or more characters (most frequent first, ties by
// text) or the learned pieces (in the order learned), each once: the same
// texts and options always give the same ids.
// kInvalidArgument for a text that is not valid UTF-8 (which text, where).
Result<std::vector<std::string>> build_wordpiece_vocabulary(const std::vector<std::string>& texts,
                                                            const VocabularyOptions& options = {});

// The tokenizer the trainer and our runtime read a vocabulary with.
// Errors as WordPieceTokenizer::from_tokens.
Result<text::WordPieceTokenizer> tokenizer_for(std::vector<std::string> vocabulary, bool lower_case);

}  // namespace rapidqa::train
