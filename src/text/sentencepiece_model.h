// SentencePieceModel: a sentencepiece model file (the ModelProto that
// sentencepiece.bpe.model, spiece.model and tokenizer.model hold) read and
// run as libsentencepiece runs it, with the same pieces and offsets:
//
//   normalisation  the model's precompiled character map (longest match),
//                  leading, trailing and repeated spaces removed, a "▁"
//                  prefix, spaces escaped as "▁" (each as its spec says);
//                  user-defined pieces pass through untouched
//   segmentation   Unigram: the Viterbi path over the pieces' scores, an
//                  unknown character where no piece covers it; BPE: the
//                  best-scored merge first, unused pieces split back
//   byte fallback  an unknown character as its UTF-8 bytes' <0xXX> pieces
//
// rapidqa reads the file itself rather than linking libsentencepiece:
// Debian's library carries its own copy of protobuf and exports it, which
// crashes any process that also loads libprotobuf (gRPC, ONNX, LibTorch)
// before main runs. The model file is untrusted input: the protobuf reader
// checks every length and refuses what it does not understand.
// tests/reference/sentencepiece_models.py holds python3-sentencepiece's
// answers for the parity tests.
//
// Thread safety: immutable after construction; every method is const.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rapidqa/status.h"
#include "text/chars_map.h"
#include "text/special_layout.h"

namespace rapidqa::text {

class SentencePieceModel {
 public:
  enum class PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
  struct Entry {
    std::string piece;
    float score = 0;
    PieceType type = PieceType::kNormal;
  };

  // kInvalidArgument, naming source, for bytes that are not a Unigram or
  // BPE model: malformed protobuf, no pieces, no unknown piece, a piece
  // that is not UTF-8, an unreadable character map.
  static Result<SentencePieceModel> parse(std::string_view bytes, const std::string& source);

  // The pieces of valid UTF-8 text (the caller checks), as
  // SentencePieceProcessor::Encode gives them.
  std::vector<TextPiece> encode(std::string_view text) const;

  const std::vector<Entry>& entries() const { return entries_; }
  std::int32_t unk_id() const { return unk_id_; }
  // The control piece a trainer spec names for <s>, </s>, <pad>; -1 when absent.
  std::int32_t bos_id() const { return bos_id_; }
  std::int32_t eos_id() const { return eos_id_; }
  std::int32_t pad_id() const { return pad_id_; }
  // The id of a normal, user-defined or unused piece; -1 when absent.
  std::int32_t find(const std::string& piece) const;

 private:
  struct Normalized {
    std::string text;
    std::vector<std::size_t> to_original;  // per byte of text, and one past its end
  };
  // One prefix of input: its normalized form and the bytes it consumed.
  std::pair<std::string_view, std::size_t> normalize_prefix(std::string_view input) const;
  Normalized normalize(std::string_view text) const;
  // Pieces as (normalized bytes, id) in order.
  std::vector<std::pair<std::string_view, std::int32_t>> unigram(std::string_view normalized) const;
  std::vector<std::pair<std::string_view, std::int32_t>> bpe(std::string_view normalized) const;
  std::size_t user_defined_prefix(std::string_view input) const;  // 0: none

  std::vector<Entry> entries_;
  std::unordered_map<std::string, std::int32_t> ids_;       // normal, user-defined, unused pieces
  std::vector<std::int32_t> byte_ids_;                      // byte -> <0xXX> piece, -1 when absent
  std::vector<std::string> user_defined_;
  std::optional<CharsMap> chars_map_;
  bool bpe_ = false;
  bool byte_fallback_ = false;
  bool add_dummy_prefix_ = true;
  bool remove_extra_whitespaces_ = true;
  bool escape_whitespaces_ = true;
  bool whitespace_as_suffix_ = false;
  std::size_t max_piece_bytes_ = 0;
  float min_score_ = 0, max_score_ = 0;
  std::int32_t unk_id_ = -1, bos_id_ = -1, eos_id_ = -1, pad_id_ = -1;
};

}  // namespace rapidqa::text
