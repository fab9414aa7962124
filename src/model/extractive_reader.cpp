#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "common/guard.h"
#include "model/model_bundle.h"
#include "rapidqa/reader.h"
#include "runtime/work_pool.h"

namespace rapidqa {
namespace {

// Indices of the k largest values among positions allowed by `eligible`.
std::vector<std::int64_t> top_positions(const float* logits, const std::vector<bool>& eligible, std::size_t k) {
  std::vector<std::int64_t> idx;
  for (std::size_t i = 0; i < eligible.size(); ++i) {
    if (eligible[i]) idx.push_back(static_cast<std::int64_t>(i));
  }
  const std::size_t keep = std::min(k, idx.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(keep), idx.end(),
                    [&](std::int64_t a, std::int64_t b) { return logits[a] > logits[b]; });
  idx.resize(keep);
  return idx;
}

}  // namespace

struct ExtractiveReader::Impl {
  ExtractiveReaderOptions options;
  model::ModelBundle bundle;
};

ExtractiveReader::ExtractiveReader() : impl_(std::make_unique<Impl>()) {}
ExtractiveReader::~ExtractiveReader() = default;

Result<std::shared_ptr<ExtractiveReader>> ExtractiveReader::load(ExtractiveReaderOptions options) {
  if (options.max_answer_tokens == 0) return Status::invalid_argument("max_answer_tokens must be positive");
  return detail::guarded("loading the reader model", [&]() -> Result<std::shared_ptr<ExtractiveReader>> {
    auto bundle = model::load_model_bundle(options.model_dir, options.lower_case);
    if (!bundle) return bundle.status();
    if (!bundle->model->qa_head) {
      return Status::invalid_argument(fmt::format(
          "{}: the checkpoint has no question-answering head (tensors qa_outputs.weight [2, hidden] and "
          "qa_outputs.bias [2]); a reader needs a BertForQuestionAnswering model",
          options.model_dir));
    }
    options.max_sequence_length = bundle->usable_sequence_length(options.max_sequence_length);
    std::shared_ptr<ExtractiveReader> reader(new ExtractiveReader());
    reader->impl_->options = std::move(options);
    reader->impl_->bundle = std::move(bundle).value();
    return reader;
  });
}

Result<std::vector<AnswerSpan>> ExtractiveReader::read(const std::string& question,
                                                       const std::vector<std::string>& passages,
                                                       std::size_t n_best) const {
  return detail::guarded("reading", [&]() -> Result<std::vector<AnswerSpan>> {
    std::vector<AnswerSpan> spans;
    if (passages.empty() || n_best == 0) return spans;
    const auto& tokenizer = *impl_->bundle.tokenizer;
    std::vector<text::TokenizedText> pairs;
    for (std::size_t p = 0; p < passages.size(); ++p) {
      auto pair = tokenizer.encode_pair(question, passages[p], impl_->options.max_sequence_length);
      if (!pair) return Status(pair.status().code(), fmt::format("passage {}: {}", p, pair.status().message()));
      pairs.push_back(std::move(pair).value());
    }
    std::vector<const text::TokenizedText*> batch;
    for (const auto& p : pairs) batch.push_back(&p);
    const model::ModelInputs inputs = model::make_batch(batch, tokenizer.pad_id());
    at::Tensor logits;
    {
      const runtime::ComputeCallSlot slot;
      c10::InferenceMode inference;
      const at::Tensor hidden = impl_->bundle.model->forward(inputs);
      logits = impl_->bundle.model->qa_head->forward(hidden).contiguous();  // [P, S, 2]
    }
    const at::Tensor start_logits = logits.select(2, 0).contiguous();
    const at::Tensor end_logits = logits.select(2, 1).contiguous();
    const std::int64_t seq = logits.size(1);
    for (std::size_t p = 0; p < pairs.size(); ++p) {
      const auto& pair = pairs[p];
      // Only tokens of the passage can start or end an answer.
      std::vector<bool> in_passage(pair.input_ids.size());
      for (std::size_t i = 0; i < pair.input_ids.size(); ++i) in_passage[i] = pair.sequence_ids[i] == 1;
      const float* s = start_logits.data_ptr<float>() + static_cast<std::int64_t>(p) * seq;
      const float* e = end_logits.data_ptr<float>() + static_cast<std::int64_t>(p) * seq;
      const auto starts = top_positions(s, in_passage, impl_->options.candidates_per_end);
      const auto ends = top_positions(e, in_passage, impl_->options.candidates_per_end);
      for (const auto st : starts) {
        for (const auto en : ends) {
          if (en < st || static_cast<std::size_t>(en - st + 1) > impl_->options.max_answer_tokens) continue;
          const std::size_t begin = pair.offsets[static_cast<std::size_t>(st)].first;
          const std::size_t end = pair.offsets[static_cast<std::size_t>(en)].second;
          if (end <= begin) continue;
          AnswerSpan span;
          span.passage = p;
          span.begin = begin;
          span.end = end;
          span.text = passages[p].substr(begin, end - begin);
          span.score = s[st] + e[en];
          spans.push_back(std::move(span));
        }
      }
    }
    if (spans.empty()) return spans;
    std::sort(spans.begin(), spans.end(), [](const AnswerSpan& a, const AnswerSpan& b) { return a.score > b.score; });
    // Probabilities over every candidate considered, before cutting to n best.
    double total = 0;
    const float best = spans.front().score;
    for (const auto& sp : spans) total += std::exp(static_cast<double>(sp.score - best));
    for (auto& sp : spans) sp.probability = static_cast<float>(std::exp(static_cast<double>(sp.score - best)) / total);
    // Several token pairs can cut the same text; keep each text once.
    std::vector<AnswerSpan> unique;
    for (auto& sp : spans) {
      const bool seen = std::any_of(unique.begin(), unique.end(), [&](const AnswerSpan& u) {
        return u.passage == sp.passage && u.begin == sp.begin && u.end == sp.end;
      });
      if (!seen) unique.push_back(std::move(sp));
      if (unique.size() == n_best) break;
    }
    return unique;
  });
}

}  // namespace rapidqa
