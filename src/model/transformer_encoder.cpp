#include "rapidqa/transformer_encoder.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/bounded_json.h"
#include "common/checksum.h"
#include "common/guard.h"
#include "model/model_bundle.h"
#include "model/pooling.h"
#include "model/sentence_pipeline.h"
#include "runtime/work_pool.h"
#include "text/utf8.h"

namespace rapidqa {

struct TransformerEncoder::Impl {
  TransformerEncoderOptions options;
  model::ModelBundle bundle;
  model::SentencePipeline pipeline;
  std::vector<Pooling> pooling;  // concatenated in this order
  std::string prompt;
  // Tokens at the start left out of pooling: [CLS] and the prompt's, when
  // the Pooling module says include_prompt false.
  std::int64_t pooling_skips = 0;
  std::size_t dimension = 0;
  // Hashing the model files costs a read of them: done once, when first
  // asked (an engine on a knowledge store asks; others never do).
  mutable std::once_flag fingerprint_once;
  mutable std::string fingerprint;

  // What the tokenizer reads: the prompt and the text, lower-cased first
  // where sentence_bert_config.json says do_lower_case.
  std::string model_text(const std::string& text) const {
    std::string full = prompt.empty() ? text : prompt + text;
    return pipeline.lower_case_input ? text::lower_case(full) : full;
  }

  Result<std::vector<text::TokenizedText>> tokenize(const std::vector<std::string>& texts) const {
    std::vector<text::TokenizedText> out;
    out.reserve(texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i) {
      auto t = bundle.tokenizer->encode(model_text(texts[i]), options.max_sequence_length);
      if (!t) return Status(t.status().code(), fmt::format("text {}: {}", i, t.status().message()));
      out.push_back(std::move(t).value());
    }
    return out;
  }

  // Pools one batch's hidden states [B, S, H] into rows of out.
  void pool_into(const at::Tensor& hidden, const at::Tensor& mask, const std::vector<std::size_t>& rows,
                 float* out) const {
    at::Tensor pooled = model::run_stages(model::pool_modes(hidden, mask, pooling, pooling_skips), pipeline.stages);
    if (options.normalize) pooled = pooled / pooled.norm(2, -1, true).clamp_min(1e-12);
    pooled = pooled.contiguous();
    const auto dim = static_cast<std::size_t>(pooled.size(1));
    const float* p = pooled.data_ptr<float>();
    for (std::size_t b = 0; b < rows.size(); ++b) std::copy(p + b * dim, p + (b + 1) * dim, out + rows[b] * dim);
  }
};

namespace {
constexpr std::pair<const char*, Pooling> kPoolingNames[] = {
    {"cls", Pooling::kCls},
    {"mean", Pooling::kMean},
    {"max", Pooling::kMax},
    {"mean_sqrt_len", Pooling::kMeanSqrtLength},
    {"weightedmean", Pooling::kWeightedMean},
    {"lasttoken", Pooling::kLastToken},
    {"model", Pooling::kFromModel},
};
}  // namespace

const char* pooling_name(Pooling mode) {
  for (const auto& [name, known] : kPoolingNames) {
    if (known == mode) return name;
  }
  return "?";
}

Result<Pooling> pooling_from_name(const std::string& name) {
  for (const auto& [known, mode] : kPoolingNames) {
    if (name == known) return mode;
  }
  return Status::invalid_argument(
      fmt::format("pooling '{}' is not one of cls, mean, max, mean_sqrt_len, weightedmean, lasttoken, model",
                  detail::clip_for_message(name)));
}

TransformerEncoder::TransformerEncoder() : impl_(std::make_unique<Impl>()) {}
TransformerEncoder::~TransformerEncoder() = default;

Result<std::shared_ptr<TransformerEncoder>> TransformerEncoder::load(TransformerEncoderOptions options) {
  if (options.max_sequence_length != 0 && options.max_sequence_length < 3) {
    return Status::invalid_argument("max_sequence_length must leave room for [CLS], a token and [SEP] (at least 3)");
  }
  if (options.max_batch_size == 0) return Status::invalid_argument("max_batch_size must be positive");
  return detail::guarded("loading the encoder model", [&]() -> Result<std::shared_ptr<TransformerEncoder>> {
    std::error_code ec;
    if (!std::filesystem::is_directory(options.model_dir, ec)) {
      return Status::not_found(fmt::format("model directory '{}' does not exist", options.model_dir));
    }
    auto pipeline = model::read_sentence_pipeline(options.model_dir);
    if (!pipeline) return pipeline.status();
    auto bundle = model::load_model_bundle(pipeline->transformer_dir, options.lower_case);
    if (!bundle) return bundle.status();
    if (options.bf16) {
      // Freshly loaded and not shared yet: safe to rewrite in place.
      auto& model = const_cast<model::TransformerModel&>(*bundle->model);
      if (Status s = model::convert_to_bf16(model); !s.is_ok()) return s;
    }
    std::shared_ptr<TransformerEncoder> encoder(new TransformerEncoder());
    Impl& impl = *encoder->impl_;
    // Explicit options win; then the directory; then the defaults.
    if (options.pooling != Pooling::kFromModel) {
      impl.pooling = {options.pooling};
    } else if (!pipeline->pooling.empty()) {
      impl.pooling = pipeline->pooling;
    } else {
      impl.pooling = {Pooling::kMean};
    }
    if (options.prompt) {
      impl.prompt = *options.prompt;
    } else {
      const std::string name = options.prompt_name.empty() ? "query" : options.prompt_name;
      const auto found = pipeline->prompts.find(name);
      if (found != pipeline->prompts.end()) {
        impl.prompt = found->second;
      } else if (!options.prompt_name.empty()) {
        std::vector<std::string> names;
        for (const auto& [known, text] : pipeline->prompts) names.push_back("'" + known + "'");
        return Status::invalid_argument(fmt::format(
            "{}: no prompt named '{}' (config_sentence_transformers.json has {})", options.model_dir,
            detail::clip_for_message(options.prompt_name), names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
      }
    }
    if (options.max_sequence_length == 0) options.max_sequence_length = pipeline->max_seq_length.value_or(128);
    options.max_sequence_length = bundle->usable_sequence_length(options.max_sequence_length);
    auto dimension = model::pipeline_dimension(impl.pooling, static_cast<std::size_t>(bundle->model->config.hidden_size),
                                               pipeline->stages);
    if (!dimension) return dimension.status();
    impl.dimension = dimension.value();
    impl.options = std::move(options);
    impl.bundle = std::move(bundle).value();
    impl.pipeline = std::move(pipeline).value();
    if (!impl.pipeline.include_prompt && !impl.prompt.empty()) {
      // As sentence-transformers counts it: the prompt tokenised alone,
      // less its closing [SEP].
      auto alone = impl.bundle.tokenizer->encode(impl.model_text(""), impl.options.max_sequence_length);
      if (!alone) return alone.status();
      impl.pooling_skips = static_cast<std::int64_t>(alone->input_ids.size()) - 1;
    }
    return encoder;
  });
}

std::size_t TransformerEncoder::dimension() const { return impl_->dimension; }

std::string TransformerEncoder::pooling() const {
  std::vector<std::string> names;
  for (Pooling mode : impl_->pooling) names.push_back(pooling_name(mode));
  return fmt::format("{}", fmt::join(names, "+"));
}

const std::string& TransformerEncoder::prompt() const { return impl_->prompt; }

std::string TransformerEncoder::name() const {
  const auto& c = impl_->bundle.model->config;
  std::string name = fmt::format("transformer-{}x{}-{}", impl_->bundle.model->layers.size(), c.hidden_size, pooling());
  if (dimension() != static_cast<std::size_t>(c.hidden_size) * impl_->pooling.size()) {
    name += fmt::format("-dense{}", dimension());
  }
  return name;
}

std::string TransformerEncoder::fingerprint() const {
  std::call_once(impl_->fingerprint_once, [this] {
    // Every regular file of the model directory and the transformer's own
    // (where modules.json puts it elsewhere), and every module file, in
    // name order: weights, configuration and vocabulary all change the
    // vectors.
    std::vector<std::filesystem::path> files;
    std::error_code error;
    for (const std::string& dir : {impl_->options.model_dir, impl_->pipeline.transformer_dir}) {
      for (const auto& item : std::filesystem::directory_iterator(dir, error)) {
        if (item.is_regular_file(error)) files.push_back(item.path());
      }
    }
    for (const std::string& file : impl_->pipeline.files) files.emplace_back(file);
    std::sort(files.begin(), files.end());
    files.erase(std::unique(files.begin(), files.end()), files.end());
    std::sort(files.begin(), files.end());
    detail::Xxh64 hasher;
    std::vector<char> buffer(1 << 20);
    for (const auto& file : files) {
      const std::string name = std::filesystem::relative(file, impl_->options.model_dir, error).string();
      hasher.update(name.data(), name.size());
      std::ifstream in(file, std::ios::binary);
      while (in) {
        in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        hasher.update(buffer.data(), static_cast<std::size_t>(in.gcount()));
      }
    }
    const TransformerEncoderOptions& o = impl_->options;
    impl_->fingerprint =
        fmt::format("{}/v1/dim={}/normalize={}/max_tokens={}/bf16={}/prompt={:016x}/files={:016x}", name(),
                    dimension(), o.normalize, o.max_sequence_length, o.bf16,
                    detail::xxh64(impl_->prompt.data(), impl_->prompt.size()), hasher.digest());
  });
  return impl_->fingerprint;
}

std::size_t TransformerEncoder::layer_count() const { return impl_->bundle.model->layers.size(); }
std::int64_t TransformerEncoder::parameter_count() const { return impl_->bundle.model->parameter_count(); }

Status TransformerEncoder::encode(const std::vector<std::string>& texts, std::vector<float>& out) const {
  return detail::guarded("encoding", [&]() -> Status {
    auto tokenized = impl_->tokenize(texts);
    if (!tokenized) return tokenized.status();
    const std::size_t dim = dimension();
    out.assign(texts.size() * dim, 0.0f);
    // Longest first, then cut into batches of similar length: padding is
    // bounded by the length spread inside one batch.
    std::vector<std::size_t> order(texts.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return (*tokenized)[a].input_ids.size() > (*tokenized)[b].input_ids.size();
    });
    const runtime::ComputeCallSlot slot;
    c10::InferenceMode inference;
    for (std::size_t start = 0; start < order.size();) {
      const std::size_t longest = (*tokenized)[order[start]].input_ids.size();
      const std::size_t by_tokens = std::max<std::size_t>(1, impl_->options.max_batch_tokens / longest);
      const std::size_t count = std::min({impl_->options.max_batch_size, by_tokens, order.size() - start});
      std::vector<const text::TokenizedText*> batch;
      std::vector<std::size_t> rows;
      for (std::size_t i = start; i < start + count; ++i) {
        batch.push_back(&(*tokenized)[order[i]]);
        rows.push_back(order[i]);
      }
      const model::ModelInputs inputs = model::make_batch(batch, impl_->bundle.tokenizer->pad_id());
      const at::Tensor hidden = impl_->bundle.model->forward(inputs);
      impl_->pool_into(hidden, inputs.attention_mask, rows, out.data());
      start += count;
    }
    return Status::ok();
  });
}

Result<std::vector<std::vector<std::int32_t>>> TransformerEncoder::token_ids(
    const std::vector<std::string>& texts) const {
  auto tokenized = impl_->tokenize(texts);
  if (!tokenized) return tokenized.status();
  std::vector<std::vector<std::int32_t>> ids;
  ids.reserve(tokenized->size());
  for (auto& t : *tokenized) ids.push_back(std::move(t.input_ids));
  return ids;
}

namespace model {

at::Tensor pool_one(const at::Tensor& hidden, const at::Tensor& mask, const at::Tensor& pooling_mask, Pooling mode) {
  const at::Tensor m = pooling_mask.to(at::kFloat).unsqueeze(-1);
  switch (mode) {
    case Pooling::kCls:
      return hidden.select(1, 0);
    case Pooling::kMax:
      return hidden.masked_fill(m == 0, -1e9).amax(1);
    case Pooling::kMeanSqrtLength:
      return (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9).sqrt();
    case Pooling::kWeightedMean: {
      const at::Tensor weights = at::arange(1, hidden.size(1) + 1, at::kFloat).view({1, -1, 1}) * m;
      return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1e-9);
    }
    case Pooling::kLastToken: {
      // Right-padded batches: the last real token is at (its length - 1).
      const at::Tensor last = (mask.to(at::kLong).sum(1) - 1).clamp_min(0);
      return hidden.gather(1, last.view({-1, 1, 1}).expand({hidden.size(0), 1, hidden.size(2)})).squeeze(1);
    }
    case Pooling::kMean:
    case Pooling::kFromModel:
      break;
  }
  return (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9);
}

at::Tensor pool_modes(const at::Tensor& hidden, const at::Tensor& mask, const std::vector<Pooling>& modes,
                      std::int64_t skipped_tokens) {
  at::Tensor pooling_mask = mask;
  if (skipped_tokens > 0) {
    pooling_mask = mask.clone();
    pooling_mask.narrow(1, 0, std::min<std::int64_t>(skipped_tokens, mask.size(1))).zero_();
  }
  std::vector<at::Tensor> parts;
  for (Pooling mode : modes) parts.push_back(pool_one(hidden, mask, pooling_mask, mode));
  return parts.size() == 1 ? parts.front() : at::cat(parts, 1);
}

at::Tensor pool_hidden(const at::Tensor& hidden, const at::Tensor& mask, Pooling pooling, bool normalize) {
  at::Tensor pooled = pool_one(hidden, mask, mask, pooling);
  if (normalize) pooled = pooled / pooled.norm(2, -1, true).clamp_min(1e-12);
  return pooled;
}

}  // namespace model
}  // namespace rapidqa
