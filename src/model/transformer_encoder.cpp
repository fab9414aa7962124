#include "rapidqa/transformer_encoder.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>

#include <fmt/format.h>

#include "common/checksum.h"
#include "common/guard.h"
#include "model/model_bundle.h"
#include "model/pooling.h"

namespace rapidqa {

struct TransformerEncoder::Impl {
  TransformerEncoderOptions options;
  model::ModelBundle bundle;
  mutable std::mutex model_mu;  // one model call at a time; each uses every intra-op thread
  // Hashing the model files costs a read of them: done once, when first
  // asked (an engine on a knowledge store asks; others never do).
  mutable std::once_flag fingerprint_once;
  mutable std::string fingerprint;

  Result<std::vector<text::TokenizedText>> tokenize(const std::vector<std::string>& texts) const {
    std::vector<text::TokenizedText> out;
    out.reserve(texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i) {
      auto t = bundle.tokenizer->encode(texts[i], options.max_sequence_length);
      if (!t) return Status(t.status().code(), fmt::format("text {}: {}", i, t.status().message()));
      out.push_back(std::move(t).value());
    }
    return out;
  }

  // Pools one batch's hidden states [B, S, H] into rows of out.
  void pool_into(const at::Tensor& hidden, const at::Tensor& mask, const std::vector<std::size_t>& rows,
                 float* out) const {
    at::Tensor pooled = model::pool_hidden(hidden, mask, options.pooling, options.normalize);
    pooled = pooled.contiguous();
    const auto dim = static_cast<std::size_t>(pooled.size(1));
    const float* p = pooled.data_ptr<float>();
    for (std::size_t b = 0; b < rows.size(); ++b) std::copy(p + b * dim, p + (b + 1) * dim, out + rows[b] * dim);
  }
};

TransformerEncoder::TransformerEncoder() : impl_(std::make_unique<Impl>()) {}
TransformerEncoder::~TransformerEncoder() = default;

Result<std::shared_ptr<TransformerEncoder>> TransformerEncoder::load(TransformerEncoderOptions options) {
  if (options.max_sequence_length < 3) {
    return Status::invalid_argument("max_sequence_length must leave room for [CLS], a token and [SEP] (at least 3)");
  }
  if (options.max_batch_size == 0) return Status::invalid_argument("max_batch_size must be positive");
  return detail::guarded("loading the encoder model", [&]() -> Result<std::shared_ptr<TransformerEncoder>> {
    auto bundle = model::load_model_bundle(options.model_dir, options.lower_case);
    if (!bundle) return bundle.status();
    if (options.bf16) {
      // Freshly loaded and not shared yet: safe to rewrite in place.
      auto& model = const_cast<model::TransformerModel&>(*bundle->model);
      if (Status s = model::convert_to_bf16(model); !s.is_ok()) return s;
    }
    options.max_sequence_length = bundle->usable_sequence_length(options.max_sequence_length);
    std::shared_ptr<TransformerEncoder> encoder(new TransformerEncoder());
    encoder->impl_->options = std::move(options);
    encoder->impl_->bundle = std::move(bundle).value();
    return encoder;
  });
}

std::size_t TransformerEncoder::dimension() const {
  return static_cast<std::size_t>(impl_->bundle.model->config.hidden_size);
}

std::string TransformerEncoder::name() const {
  const auto& c = impl_->bundle.model->config;
  return fmt::format("transformer-{}x{}-{}", impl_->bundle.model->layers.size(), c.hidden_size,
                     impl_->options.pooling == Pooling::kCls ? "cls" : "mean");
}

std::string TransformerEncoder::fingerprint() const {
  std::call_once(impl_->fingerprint_once, [this] {
    // Every regular file of the model directory, in name order: weights,
    // configuration and vocabulary all change the vectors.
    std::vector<std::filesystem::path> files;
    std::error_code error;
    for (const auto& item : std::filesystem::directory_iterator(impl_->options.model_dir, error)) {
      if (item.is_regular_file(error)) files.push_back(item.path());
    }
    std::sort(files.begin(), files.end());
    detail::Xxh64 hasher;
    std::vector<char> buffer(1 << 20);
    for (const auto& file : files) {
      const std::string name = file.filename().string();
      hasher.update(name.data(), name.size());
      std::ifstream in(file, std::ios::binary);
      while (in) {
        in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        hasher.update(buffer.data(), static_cast<std::size_t>(in.gcount()));
      }
    }
    const TransformerEncoderOptions& o = impl_->options;
    impl_->fingerprint =
        fmt::format("{}/v1/dim={}/normalize={}/max_tokens={}/bf16={}/files={:016x}", name(), dimension(),
                    o.normalize, o.max_sequence_length, o.bf16, hasher.digest());
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
    std::lock_guard<std::mutex> lock(impl_->model_mu);
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

at::Tensor pool_hidden(const at::Tensor& hidden, const at::Tensor& mask, Pooling pooling, bool normalize) {
  at::Tensor pooled;
  if (pooling == Pooling::kCls) {
    pooled = hidden.select(1, 0);
  } else {
    const at::Tensor m = mask.to(at::kFloat).unsqueeze(-1);
    pooled = (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9);
  }
  if (normalize) pooled = pooled / pooled.norm(2, -1, true).clamp_min(1e-12);
  return pooled;
}

}  // namespace model
}  // namespace rapidqa
