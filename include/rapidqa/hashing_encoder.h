// HashingEncoder: the built-in weightless lexical sentence encoder. It needs
// no model file: word unigrams and bigrams, character n-grams of each word,
// and for Chinese (and other CJK text) each character and each character
// bigram are hashed into a fixed number of signed buckets, weighted by IDF
// learned from the knowledge base (adapt), and L2-normalised. It is the
// default encoder and the lightweight fallback when a transformer model is
// too slow for a request. It keeps what each word it has encoded adds to a
// vector (at most 8 MiB, some 30,000 words), so a word seen before costs one
// lookup; the vectors are the same either way.
//
// Thread safety: encode() is thread-safe; adapt() must not run concurrently
// with encode() (the engine guarantees this).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rapidqa/encoder.h"
#include "rapidqa/export.h"
#include "rapidqa/status.h"

namespace rapidqa {

struct HashingEncoderOptions {
  std::size_t dimension = 384;      // vector length (number of hash buckets)
  std::uint64_t seed = 0x5eed;      // hash seed; vectors are only comparable under one seed
  float word_weight = 1.0f;         // weight of a word unigram
  float word_bigram_weight = 1.0f;  // weight of two adjacent words
  float char_ngram_weight = 0.4f;   // weight of each character n-gram of a word
  std::size_t char_ngram_min = 3;   // shortest character n-gram (characters)
  std::size_t char_ngram_max = 5;   // longest character n-gram (characters)
  float cjk_char_weight = 1.0f;     // weight of a single CJK character
  float cjk_bigram_weight = 1.0f;   // weight of two adjacent CJK characters
};

// kInvalidArgument naming the field: dimension outside [1, 65536],
// char_ngram_min of 0 or above char_ngram_max, char_ngram_max above 32, a
// weight that is negative or not finite.
RAPIDQA_EXPORT Status validate_hashing_encoder_options(const HashingEncoderOptions& options);

class RAPIDQA_EXPORT HashingEncoder final : public Encoder {
 public:
  // Refuses bad options (validate_hashing_encoder_options) rather than
  // fixing them.
  static Result<std::unique_ptr<HashingEncoder>> create(HashingEncoderOptions options = {});
  // Deprecated in 0.2, removed in 0.3: raises a zero dimension or n-gram
  // length to 1 instead of refusing it.
  [[deprecated("use HashingEncoder::create(), which refuses bad options")]] explicit HashingEncoder(
      HashingEncoderOptions options = {});
  ~HashingEncoder() override;
  HashingEncoder(const HashingEncoder&) = delete;
  HashingEncoder& operator=(const HashingEncoder&) = delete;

  std::size_t dimension() const override;
  std::string name() const override;
  bool is_lightweight() const override { return true; }
  Status encode(const std::vector<std::string>& texts, std::vector<float>& out) const override;
  // Learns document frequencies of every feature from the corpus. Before the
  // first call every feature weighs the same (IDF 1).
  void adapt(const std::vector<std::string>& corpus) override;
  // The options and a hash of the learned IDF table.
  std::string fingerprint() const override;
  // The IDF table adapt() learned ("" before the first adapt).
  std::string learned_state() const override;
  Status restore_learned_state(const std::string& state) override;

  // Encodes one text into out[0, dimension()).
  Status encode_one(const std::string& text, float* out) const;

 private:
  struct Checked {};  // options already validated
  HashingEncoder(Checked, HashingEncoderOptions options);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapidqa
