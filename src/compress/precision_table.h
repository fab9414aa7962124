// PrecisionTable: which precision each layer of a model gets, chosen by
// name pattern. One rule per line:
//
//   PATTERN  int8|fp32|auto  [observer=NAME]  [bias-correction]
//
// PATTERN is a shell glob over layer names (fnmatch): embeddings.word_embeddings,
// embeddings.position_embeddings, embeddings.token_type_embeddings,
// encoder.layer.N.attention.qkv, encoder.layer.N.attention.output,
// encoder.layer.N.intermediate, encoder.layer.N.output, pooler, qa_outputs.
// The first matching rule wins; an unmatched layer stays FP32. "auto"
// quantizes a layer unless INT8 costs more accuracy than the budget or is
// slower for its shape. '#' starts a comment.
//
// Thread safety: thread-compatible (immutable after parsing).
#pragma once

#include <string>
#include <vector>

#include "compress/observers.h"
#include "rapidqa/status.h"

namespace rapidqa::compress {

enum class Precision { kFp32, kInt8, kAuto };
const char* precision_name(Precision p);

struct LayerPrecision {
  Precision precision = Precision::kFp32;
  ObserverKind observer = ObserverKind::kMinMax;  // static activation ranges
  bool bias_correction = false;                   // add back the mean output shift measured on calibration data
};

struct PrecisionRule {
  std::string pattern;
  LayerPrecision layer;
};

class PrecisionTable {
 public:
  // kInvalidArgument naming the line and what was expected.
  static Result<PrecisionTable> parse(const std::string& text, const std::string& source);
  // "default" (the practice's table: embeddings INT8 with max-abs scales,
  // attention FP32, FFN INT8 with moving-average ranges and bias
  // correction), "auto" (every encoder layer auto), "int8" (every layer
  // INT8), or else the path of a table file.
  static Result<PrecisionTable> named_or_file(const std::string& name_or_path);

  // The rule for a layer name (FP32 when none matches).
  LayerPrecision lookup(const std::string& layer_name) const;
  const std::vector<PrecisionRule>& rules() const { return rules_; }
  std::string to_text() const;

 private:
  std::vector<PrecisionRule> rules_;
};

}  // namespace rapidqa::compress
