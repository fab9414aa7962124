#include "compress/quantizer.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/guard.h"
#include "common/timing.h"
#include "model/int8_linear.h"
#include "model/model_bundle.h"
#include "model/pooling.h"
#include "model/transformer_checkpoint.h"
#include "rapidqa/knowledge_file.h"

namespace rapidqa::compress {
namespace {

using model::Int8Linear;
using model::LinearOp;

// Passes calls through to the FP32 layer it wraps and keeps what the
// quantizer needs from them: the observer's view of every input, and an
// evenly spread sample of input rows.
class RecordingLinear final : public LinearOp {
 public:
  RecordingLinear(std::unique_ptr<LinearOp> inner, std::unique_ptr<RangeObserver> observer,
                  std::int64_t rows_per_call, std::int64_t max_rows)
      : inner_(std::move(inner)), observer_(std::move(observer)), rows_per_call_(rows_per_call), max_rows_(max_rows) {}

  at::Tensor forward(const at::Tensor& input) const override {
    if (observer_) observer_->observe(input);
    const at::Tensor rows = input.reshape({-1, input.size(-1)});
    if (kept_ < max_rows_ && rows.size(0) > 0) {
      const std::int64_t take = std::min({rows_per_call_, rows.size(0), max_rows_ - kept_});
      const at::Tensor index = at::linspace(0, static_cast<double>(rows.size(0) - 1), take).round().to(at::kLong);
      samples_.push_back(rows.index_select(0, index).clone());
      kept_ += take;
    }
    return inner_->forward(input);
  }
  std::int64_t in_features() const override { return inner_->in_features(); }
  std::int64_t out_features() const override { return inner_->out_features(); }
  model::Activation activation() const override { return inner_->activation(); }
  std::string kind() const override { return inner_->kind(); }
  std::size_t weight_bytes() const override { return inner_->weight_bytes(); }
  at::Tensor dense_weight() const override { return inner_->dense_weight(); }
  at::Tensor dense_bias() const override { return inner_->dense_bias(); }

  std::unique_ptr<LinearOp> release() { return std::move(inner_); }
  const RangeObserver* observer() const { return observer_.get(); }
  at::Tensor samples() const { return samples_.empty() ? at::Tensor() : at::cat(samples_, 0); }

 private:
  std::unique_ptr<LinearOp> inner_;
  // Calibration runs one forward pass at a time, so the recording needs no lock.
  mutable std::unique_ptr<RangeObserver> observer_;
  std::int64_t rows_per_call_, max_rows_;
  mutable std::vector<at::Tensor> samples_;
  mutable std::int64_t kept_ = 0;
};

// auto keeps FP32 for speed only where INT8 is slower than FP32 by at least
// this share at every measured row count. Medians of the same layer in two
// processes differ by a few percent on a busy host: without a margin, a
// layer about as fast in INT8 as in FP32 would change precision from one
// run to the next. Where the two are that close INT8 is kept, so auto is
// never slower than quantizing every layer.
constexpr double kAutoFp32SpeedMargin = 0.10;

// An auto layer's two forms while auto decides: the one not in the model
// waits here.
struct AutoLayer {
  std::unique_ptr<LinearOp>* slot = nullptr;
  std::unique_ptr<LinearOp> other;  // FP32 while the slot holds INT8, and back
  bool in_fp32 = false;
  double sqnr_db = 0;
  std::size_t report_index = 0;

  void use_fp32(bool fp32) {
    if (fp32 != in_fp32) {
      std::swap(*slot, other);
      in_fp32 = fp32;
    }
  }
};

// The layer's FP32 and INT8 forms on the same input, timed side by side
// (interleaved samples of at least 2 ms each; medians, and the median of
// INT8's time over FP32's within each round).
timing::PairedTimes time_fp32_and_int8(const LinearOp& fp32, const LinearOp& int8, const at::Tensor& x) {
  timing::TimingOptions options;
  options.warmup_calls = 1;  // first touch of buffers and oneDNN's kernel cache
  options.samples = 9;
  options.min_sample_time = std::chrono::milliseconds(2);
  return timing::interleaved_median_times([&] { (void)fp32.forward(x); }, [&] { (void)int8.forward(x); }, options);
}

double microseconds(timing::Seconds t) { return t.count() * 1e6; }

// Latency inputs of `rows` rows: the recorded samples repeated (so the
// dynamic range is realistic), or random values without any.
at::Tensor latency_input(const at::Tensor& samples, std::int64_t rows, std::int64_t width) {
  if (!samples.defined() || samples.size(0) == 0) return at::randn({rows, width});
  const std::int64_t repeats = (rows + samples.size(0) - 1) / samples.size(0);
  return samples.repeat({repeats, 1}).narrow(0, 0, rows).contiguous();
}

at::Tensor pooled_embeddings(const model::TransformerModel& m, const std::vector<model::ModelInputs>& batches) {
  std::vector<at::Tensor> out;
  for (const auto& b : batches) out.push_back(model::pool_hidden(m.forward(b), b.attention_mask, Pooling::kMean, true));
  return out.empty() ? at::Tensor() : at::cat(out, 0);
}

void say(const QuantizerOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

}  // namespace

double sqnr_db(const at::Tensor& reference, const at::Tensor& approx) {
  const double signal = reference.to(at::kDouble).pow(2).sum().item<double>();
  const double noise = (reference.to(at::kDouble) - approx.to(at::kDouble)).pow(2).sum().item<double>();
  if (noise <= 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

double output_cosine(const at::Tensor& reference, const at::Tensor& approx) {
  const at::Tensor a = reference.to(at::kDouble).reshape({-1});
  const at::Tensor b = approx.to(at::kDouble).reshape({-1});
  const double denominator = a.norm().item<double>() * b.norm().item<double>();
  return denominator > 0 ? a.dot(b).item<double>() / denominator : 1.0;
}

std::vector<LinearSlot> linear_slots(model::TransformerModel& m) {
  std::vector<LinearSlot> slots;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const std::string p = fmt::format("encoder.layer.{}.", i);
    auto& layer = m.layers[i];
    slots.push_back({p + "attention.qkv", &layer.qkv});
    slots.push_back({p + "attention.output", &layer.attention_output});
    slots.push_back({p + "intermediate", &layer.intermediate});
    slots.push_back({p + "output", &layer.output});
  }
  if (m.pooler) slots.push_back({"pooler", &m.pooler});
  if (m.qa_head) slots.push_back({"qa_outputs", &m.qa_head});
  return slots;
}

Result<QuantizationReport> quantize_transformer(model::TransformerModel& m,
                                                const std::vector<model::ModelInputs>& calibration,
                                                const PrecisionTable& table, const QuantizerOptions& options) {
  c10::InferenceMode inference;
  const bool calibrated = !calibration.empty();
  if (options.mode == QuantizationMode::kStatic && !calibrated) {
    return Status::invalid_argument("static quantization needs calibration text (none was given)");
  }
  QuantizationReport report;
  report.latency_rows = options.latency_rows;
  report.fp32_weight_bytes = m.weight_bytes();
  report.reduced_range = model::int8_needs_reduced_range();

  // 1. Record every candidate layer's inputs over the calibration text.
  std::vector<LinearSlot> slots = linear_slots(m);
  std::vector<LayerPrecision> wanted;
  const auto batches = static_cast<std::int64_t>(std::max<std::size_t>(1, calibration.size()));
  const auto max_rows = static_cast<std::int64_t>(options.sample_rows);
  for (const LinearSlot& slot : slots) {
    wanted.push_back(table.lookup(slot.name));
    if (wanted.back().precision == Precision::kFp32) continue;
    std::unique_ptr<RangeObserver> observer;
    if (options.mode == QuantizationMode::kStatic) observer = make_observer(wanted.back().observer);
    *slot.op = std::make_unique<RecordingLinear>(std::move(*slot.op), std::move(observer),
                                                 std::max<std::int64_t>(1, (max_rows + batches - 1) / batches),
                                                 max_rows);
  }
  at::Tensor reference;
  if (calibrated) {
    std::vector<at::Tensor> pooled;
    for (std::size_t b = 0; b < calibration.size(); ++b) {
      say(options, fmt::format("calibrating: batch {}/{}", b + 1, calibration.size()));
      const auto& batch = calibration[b];
      pooled.push_back(model::pool_hidden(m.forward(batch), batch.attention_mask, Pooling::kMean, true));
    }
    reference = at::cat(pooled, 0);
  }

  // 2. Quantize layer by layer, measuring each against its FP32 self on the
  // recorded inputs.
  std::vector<AutoLayer> auto_layers;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    LinearSlot& slot = slots[i];
    const LayerPrecision& want = wanted[i];
    LayerQuantizationReport r;
    r.name = slot.name;
    r.requested = precision_name(want.precision);
    at::Tensor samples;
    if (auto* recording = dynamic_cast<RecordingLinear*>(slot.op->get())) {
      samples = recording->samples();
      // The observer's verdict, taken before the wrapper (and it) goes.
      const RangeObserver* observer = recording->observer();
      const auto range = observer ? observer->range() : std::pair<float, float>{0, 0};
      if (observer) r.observer = observer_name(observer->kind());
      *slot.op = recording->release();
      LinearOp& fp32 = **slot.op;
      r.in_features = fp32.in_features();
      r.out_features = fp32.out_features();
      const at::Tensor weight = fp32.dense_weight().contiguous();
      at::Tensor bias = fp32.dense_bias();
      model::QuantizedWeight qweight = model::quantize_weight_per_channel(weight);
      model::InputQuantization input;
      if (options.mode == QuantizationMode::kStatic) {
        input.dynamic = false;
        input.range_min = range.first;
        input.range_max = range.second;
      }
      const bool have_samples = samples.defined() && samples.size(0) > 0;
      if (want.bias_correction && have_samples) {
        // The expected shift of the pre-activation output, measured on the
        // calibration rows, goes back into the bias.
        const at::Tensor exact = at::linear(samples, weight, bias);
        const Int8Linear linear_only(qweight, bias, model::Activation::kNone, input);
        const at::Tensor shift = (exact - linear_only.forward(samples)).mean(0);
        bias = bias.defined() ? bias + shift : shift;
        r.bias_corrected = true;
      } else if (want.bias_correction) {
        r.note = "no calibration text: bias not corrected";
      }
      auto quantized = std::make_unique<Int8Linear>(std::move(qweight), bias, fp32.activation(), input);
      if (have_samples) {
        const at::Tensor exact = fp32.forward(samples);
        const at::Tensor approx = quantized->forward(samples);
        r.sqnr_db = sqnr_db(exact, approx);
        r.cosine = output_cosine(exact, approx);
      } else {
        r.sqnr_db = std::numeric_limits<double>::quiet_NaN();
        r.cosine = std::numeric_limits<double>::quiet_NaN();
      }
      // auto keeps FP32 for speed only where INT8 is clearly slower at
      // every row count measured.
      bool int8_slower_everywhere = !options.latency_rows.empty();
      std::string slower;
      for (std::int64_t rows : options.latency_rows) {
        const at::Tensor x = latency_input(samples, rows, r.in_features);
        const timing::PairedTimes t = time_fp32_and_int8(fp32, *quantized, x);
        r.fp32_microseconds.push_back(microseconds(t.first));
        r.int8_microseconds.push_back(microseconds(t.second));
        int8_slower_everywhere = int8_slower_everywhere && t.paired_ratio >= 1.0 + kAutoFp32SpeedMargin;
        slower += fmt::format("{}{:.2f}x at {} rows", slower.empty() ? "" : ", ", t.paired_ratio, rows);
      }
      if (want.precision == Precision::kAuto && int8_slower_everywhere) {
        r.note = fmt::format("auto: INT8 takes {:.0f}% or more longer than FP32 at every row count ({})",
                             100 * kAutoFp32SpeedMargin, slower);
        r.precision = "fp32";
      } else {
        r.precision = quantized->kind();
        if (want.precision == Precision::kAuto && have_samples) {
          // Accuracy is judged on the whole model once every layer is in
          // (below); until then the FP32 form waits beside the INT8 one.
          auto_layers.push_back({slot.op, std::move(*slot.op), false, r.sqnr_db, report.layers.size()});
        }
        *slot.op = std::move(quantized);
      }
      say(options, fmt::format("{}: {}{}", r.name, r.precision, r.note.empty() ? "" : " (" + r.note + ")"));
    } else {
      LinearOp& fp32 = **slot.op;
      r.in_features = fp32.in_features();
      r.out_features = fp32.out_features();
      r.precision = "fp32";
      r.sqnr_db = std::numeric_limits<double>::infinity();
      for (std::int64_t rows : options.latency_rows) {
        const at::Tensor x = at::randn({rows, r.in_features});
        timing::TimingOptions timed;
        timed.samples = 5;
        timed.min_sample_time = std::chrono::milliseconds(2);
        const double us = microseconds(timing::median_time_per_call([&] { (void)fp32.forward(x); }, timed));
        r.fp32_microseconds.push_back(us);
        r.int8_microseconds.push_back(us);
      }
    }
    report.layers.push_back(std::move(r));
  }

  // 3. Embedding tables: INT8 per row, scales from each row's max-abs.
  const std::pair<const char*, model::EmbeddingTable*> tables[] = {
      {"embeddings.word_embeddings", &m.word_embeddings},
      {"embeddings.position_embeddings", &m.position_embeddings},
      {"embeddings.token_type_embeddings", &m.token_type_embeddings}};
  for (const auto& [name, table_ptr] : tables) {
    if (!table_ptr->defined()) continue;
    const LayerPrecision want = table.lookup(name);
    LayerQuantizationReport r;
    r.name = name;
    r.requested = precision_name(want.precision);
    r.in_features = table_ptr->width();
    r.out_features = table_ptr->rows();
    r.sqnr_db = std::numeric_limits<double>::infinity();
    r.precision = table_ptr->is_quantized() ? "int8-rows" : "fp32";
    if (want.precision != Precision::kFp32 && !table_ptr->is_quantized()) {
      const at::Tensor before = table_ptr->dense();
      model::EmbeddingTable quantized = table_ptr->quantize();
      const at::Tensor after = quantized.dense();
      r.sqnr_db = sqnr_db(before, after);
      r.cosine = output_cosine(before, after);
      r.observer = "max-abs";
      r.precision = "int8-rows";
      *table_ptr = std::move(quantized);
    }
    report.layers.push_back(std::move(r));
  }

  // 3b. auto's accuracy budget is the model's: with every auto layer in
  // INT8, the worst calibration text's sentence vector must keep
  // min_vector_cosine to FP32's. Where it does not, layers go back to FP32
  // lowest SQNR first: those below min_sqnr_db, then as few more as the
  // budget needs (found by bisection, one model pass over the calibration
  // text per step).
  // The cosines of the model as it is now, when the last pass measured it
  // (step 4 reports them without a pass of its own).
  at::Tensor cosines;
  auto measure = [&] { cosines = (reference * pooled_embeddings(m, calibration)).sum(1); };
  if (calibrated && !auto_layers.empty()) {
    auto meets_budget = [&] {
      measure();
      return cosines.min().item<double>() >= options.min_vector_cosine;
    };
    say(options, fmt::format("auto: the model with {} layers in INT8 against the cosine budget {}", auto_layers.size(),
                             options.min_vector_cosine));
    if (!meets_budget()) {
      std::vector<AutoLayer*> order;
      for (auto& a : auto_layers) order.push_back(&a);
      std::stable_sort(order.begin(), order.end(),
                       [](const AutoLayer* a, const AutoLayer* b) { return a->sqnr_db < b->sqnr_db; });
      auto revert_first = [&](std::size_t k) {
        for (std::size_t i = 0; i < order.size(); ++i) {
          if (order[i]->in_fp32 != (i < k)) cosines = at::Tensor();  // the model changed since
          order[i]->use_fp32(i < k);
        }
      };
      std::size_t low = 0;
      while (low < order.size() && order[low]->sqnr_db < options.min_sqnr_db) ++low;
      revert_first(low);
      std::size_t reverted = low;
      if (!meets_budget()) {
        // The smallest k in (low, n] that meets it; all n always does, as
        // far as auto layers can help.
        std::size_t lo = low, hi = order.size();
        while (hi - lo > 1) {
          const std::size_t mid = lo + (hi - lo) / 2;
          revert_first(mid);
          (meets_budget() ? hi : lo) = mid;
        }
        reverted = hi;
        revert_first(reverted);
      }
      for (std::size_t i = 0; i < reverted; ++i) {
        LayerQuantizationReport& r = report.layers[order[i]->report_index];
        r.precision = "fp32";
        r.note = order[i]->sqnr_db < options.min_sqnr_db
                     ? fmt::format("auto: the model misses the cosine budget {} in INT8, and this layer's SQNR "
                                   "{:.1f} dB is below {:.1f} dB",
                                   options.min_vector_cosine, order[i]->sqnr_db, options.min_sqnr_db)
                     : fmt::format("auto: the model misses the cosine budget {} in INT8; this layer (SQNR {:.1f} "
                                   "dB) is among the {} lowest that go back to FP32",
                                   options.min_vector_cosine, order[i]->sqnr_db, reverted);
        say(options, fmt::format("{}: fp32 ({})", r.name, r.note));
      }
    }
  }

  // 4. The whole model against FP32 on the calibration text.
  report.quantized_weight_bytes = m.weight_bytes();
  if (calibrated) {
    if (!cosines.defined()) {
      say(options, "measuring the quantized model on the calibration text");
      measure();
    }
    report.embedding_cosine_mean = cosines.mean().item<double>();
    report.embedding_cosine_min = cosines.min().item<double>();
  }
  return report;
}

}  // namespace rapidqa::compress

namespace rapidqa {

std::string QuantizationReport::to_text() const {
  std::string out = fmt::format("{:<36} {:>11} {:<13} {:<14} {:>8} {:>8}", "layer", "shape", "precision",
                                "observer", "SQNR dB", "cosine");
  for (std::int64_t rows : latency_rows) out += fmt::format(" {:>10} {:>10}", fmt::format("fp32@{}", rows), fmt::format("int8@{}", rows));
  out += "  note\n";
  for (const auto& l : layers) {
    const std::string sqnr = std::isinf(l.sqnr_db) ? "-" : std::isnan(l.sqnr_db) ? "n/a" : fmt::format("{:.1f}", l.sqnr_db);
    const std::string cosine = std::isnan(l.cosine) ? "n/a" : fmt::format("{:.5f}", l.cosine);
    out += fmt::format("{:<36} {:>11} {:<13} {:<14} {:>8} {:>8}", l.name,
                       fmt::format("{}x{}", l.out_features, l.in_features), l.precision,
                       l.observer.empty() ? "-" : l.observer + (l.bias_corrected ? "+bc" : ""), sqnr, cosine);
    for (std::size_t i = 0; i < latency_rows.size(); ++i) {
      if (i < l.fp32_microseconds.size()) {
        out += fmt::format(" {:>8.1f}us {:>8.1f}us", l.fp32_microseconds[i], l.int8_microseconds[i]);
      } else {
        out += fmt::format(" {:>10} {:>10}", "-", "-");
      }
    }
    out += l.note.empty() ? "\n" : "  " + l.note + "\n";
  }
  out += fmt::format("weights: {:.1f} MB FP32 -> {:.1f} MB ({:.1f}%)\n", fp32_weight_bytes / 1e6,
                     quantized_weight_bytes / 1e6, 100.0 * quantized_weight_bytes / std::max<std::size_t>(1, fp32_weight_bytes));
  if (calibration_texts > 0) {
    out += fmt::format("sentence vectors of {} calibration texts: cosine to FP32 mean {:.5f}, min {:.5f}\n",
                       calibration_texts, embedding_cosine_mean, embedding_cosine_min);
  }
  if (reduced_range) out += "activations use 7 bits: this CPU's INT8 kernels lack VNNI and would saturate\n";
  return out;
}

Result<std::vector<std::string>> read_calibration_texts(const std::string& path) {
  std::vector<std::string> texts;
  const bool jsonl = path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
  if (jsonl) {
    auto kb = read_knowledge_file(path);
    if (!kb) return kb.status();
    for (const auto& e : kb->entries) {
      texts.push_back(e.question);
      texts.insert(texts.end(), e.alternates.begin(), e.alternates.end());
    }
  } else {
    std::ifstream in(path);
    if (!in) return Status::not_found(fmt::format("{}: cannot open the calibration file", path));
    for (std::string line; std::getline(in, line);) {
      if (line.find_first_not_of(" \t\r") != std::string::npos) texts.push_back(line);
    }
  }
  if (texts.empty()) return Status::invalid_argument(fmt::format("{}: holds no calibration text", path));
  return texts;
}

Result<QuantizationReport> quantize_model(const std::string& model_dir, const std::string& out_dir,
                                          const QuantizerOptions& options) {
  return detail::guarded("quantizing the model", [&]() -> Result<QuantizationReport> {
    if (options.calibration_batch_size == 0) return Status::invalid_argument("calibration_batch_size must be positive");
    if (!(options.min_vector_cosine >= -1.0 && options.min_vector_cosine <= 1.0)) {
      return Status::invalid_argument(
          fmt::format("min_vector_cosine must be a cosine in [-1, 1], not {}", options.min_vector_cosine));
    }
    if (options.max_sequence_length < 3) return Status::invalid_argument("max_sequence_length must be at least 3");
    for (std::int64_t rows : options.latency_rows) {
      if (rows <= 0) return Status::invalid_argument("latency_rows must be positive");
    }
    auto table = compress::PrecisionTable::named_or_file(options.precision_table);
    if (!table) return table.status();
    auto bundle = model::load_model_bundle(model_dir, -1);
    if (!bundle) return bundle.status();
    // The bundle's model was made for us alone and is not shared yet, so it
    // may be rewritten in place.
    auto& m = const_cast<model::TransformerModel&>(*bundle->model);
    for (const auto& l : m.layers) {
      if (l.qkv->kind().rfind("int8", 0) == 0 || l.intermediate->kind().rfind("int8", 0) == 0) {
        return Status::invalid_argument(fmt::format("{}: the model is quantized already", model_dir));
      }
    }

    // Calibration batches of similar length, longest first.
    std::vector<text::TokenizedText> tokenized;
    const std::size_t max_length = bundle->usable_sequence_length(options.max_sequence_length);
    for (std::size_t i = 0; i < options.calibration_texts.size(); ++i) {
      auto t = bundle->tokenizer->encode(options.calibration_texts[i], max_length);
      if (!t) return Status(t.status().code(), fmt::format("calibration text {}: {}", i + 1, t.status().message()));
      tokenized.push_back(std::move(t).value());
    }
    std::sort(tokenized.begin(), tokenized.end(),
              [](const auto& a, const auto& b) { return a.input_ids.size() > b.input_ids.size(); });
    std::vector<model::ModelInputs> batches;
    for (std::size_t start = 0; start < tokenized.size(); start += options.calibration_batch_size) {
      std::vector<const text::TokenizedText*> batch;
      for (std::size_t i = start; i < std::min(tokenized.size(), start + options.calibration_batch_size); ++i) {
        batch.push_back(&tokenized[i]);
      }
      batches.push_back(model::make_batch(batch, bundle->tokenizer->pad_id()));
    }
    auto report = compress::quantize_transformer(m, batches, table.value(), options);
    if (!report) return report.status();
    report->calibration_texts = tokenized.size();

    nlohmann::json layers = nlohmann::json::object();
    for (const auto& l : report->layers) layers[l.name] = l.precision;
    const std::map<std::string, std::string> metadata{
        {"format", "pt"},
        {"rapidqa.quantization",
         nlohmann::json{{"mode", options.mode == QuantizationMode::kStatic ? "static" : "dynamic"},
                        {"table", table->to_text()},
                        {"layers", layers}}
             .dump()}};
    const Status saved = model::save_transformer(m, model_dir, out_dir, metadata);
    if (!saved.is_ok()) return saved;
    return report;
  });
}

}  // namespace rapidqa
