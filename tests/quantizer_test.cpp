// The Quantizer: PyTorch's quantization parameters on the same inputs
// (tests/reference/quantization_reference.py writes them), the error bound
// of a quantized linear layer, no saturation with large activations, the
// observers, precision tables, save and load, and the engine answering with
// a quantized model.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "compress/observers.h"
#include "compress/precision_table.h"
#include "compress/quantizer.h"
#include "model/int8_linear.h"
#include "model/linear_op.h"
#include "model/safetensors_file.h"
#include "model/transformer_model.h"
#include "rapidqa/qa_engine.h"
#include "rapidqa/pruner.h"
#include "rapidqa/quantizer.h"
#include "rapidqa/reader.h"
#include "rapidqa/transformer_encoder.h"
#include "support/engine_check.h"

namespace fs = std::filesystem;
using rapidqa::compress::ObserverKind;
using rapidqa::model::Activation;
using rapidqa::model::InputQuantization;
using rapidqa::model::Int8Linear;

namespace {

const std::string kModels = RAPIDQA_TINY_MODELS;

const nlohmann::json& reference() {
  static const nlohmann::json j = [] {
    std::ifstream in(std::string(RAPIDQA_QUANT_REFERENCE));
    REQUIRE(in);
    return nlohmann::json::parse(in);
  }();
  return j;
}

at::Tensor tensor_of(const nlohmann::json& values) {
  std::vector<float> flat;
  std::vector<std::int64_t> shape;
  if (values.at(0).is_array()) {
    shape = {static_cast<std::int64_t>(values.size()), static_cast<std::int64_t>(values.at(0).size())};
    for (const auto& row : values) for (const auto& v : row) flat.push_back(v.get<float>());
  } else {
    shape = {static_cast<std::int64_t>(values.size())};
    for (const auto& v : values) flat.push_back(v.get<float>());
  }
  return at::tensor(flat).view(shape);
}

rapidqa::model::QuantParams observe_all(ObserverKind kind, bool symmetric, std::int32_t qmin, std::int32_t qmax) {
  auto observer = rapidqa::compress::make_observer(kind);
  for (const auto& batch : reference().at("batches")) observer->observe(tensor_of(batch));
  const auto [lo, hi] = observer->range();
  return symmetric ? rapidqa::model::symmetric_qparams(lo, hi, qmin, qmax)
                   : rapidqa::model::affine_qparams(lo, hi, qmin, qmax);
}

void check_params(const rapidqa::model::QuantParams& p, const nlohmann::json& expected) {
  CHECK(p.scale == Approx(expected.at("scale").get<double>()).epsilon(1e-6));
  CHECK(p.zero_point == expected.at("zero_point").get<int>());
}


fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("rapidqa-quantizer-test-" + name);
  fs::remove_all(dir);
  return dir;
}

}  // namespace

TEST_CASE("Observers give PyTorch's scale and zero point on the same inputs", "[quantizer]") {
  const auto& ref = reference();
  check_params(observe_all(ObserverKind::kMinMax, false, 0, 255), ref.at("min_max_affine"));
  check_params(observe_all(ObserverKind::kMinMax, false, 0, 127), ref.at("min_max_affine_reduced"));
  check_params(observe_all(ObserverKind::kMinMax, true, -128, 127), ref.at("min_max_symmetric"));
  // Averaging constant 0.01: the first batch sets the range, later ones move it 1%.
  check_params(observe_all(ObserverKind::kMovingAverage, false, 0, 255), ref.at("moving_average_affine"));
  auto moving = rapidqa::compress::make_observer(ObserverKind::kMovingAverage);
  for (const auto& batch : ref.at("batches")) moving->observe(tensor_of(batch));
  CHECK(moving->range().first == Approx(ref.at("moving_average_affine").at("min").get<double>()).epsilon(1e-6));
  CHECK(moving->range().second == Approx(ref.at("moving_average_affine").at("max").get<double>()).epsilon(1e-6));
}

TEST_CASE("Weights quantize per channel exactly as quantize_per_channel does", "[quantizer]") {
  const auto& w = reference().at("weight");
  const auto q = rapidqa::model::quantize_weight_per_channel(tensor_of(w.at("values")));
  const at::Tensor scales = tensor_of(w.at("scales"));
  CHECK(at::allclose(q.scales, scales, 1e-6, 0));
  CHECK(q.values.to(at::kFloat).equal(tensor_of(w.at("int"))));

  const auto& t = reference().at("quantize_per_tensor");
  const at::Tensor x = tensor_of(t.at("x")).contiguous();
  std::vector<std::uint8_t> out(static_cast<std::size_t>(x.numel()));
  rapidqa::model::quantize_to_u8(x.data_ptr<float>(), x.numel(),
                                 {t.at("scale").get<float>(), t.at("zero_point").get<std::int32_t>()}, 255,
                                 out.data());
  const auto expected = t.at("int").get<std::vector<int>>();
  for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(static_cast<int>(out[i]) == expected[i]);
}

TEST_CASE("Max-abs, percentile and entropy observers clip as documented", "[quantizer]") {
  at::manual_seed(3);
  at::Tensor x = at::randn({20000});
  x[5] = 40.0f;  // one outlier
  auto max_abs = rapidqa::compress::make_observer(ObserverKind::kMaxAbs);
  max_abs->observe(x);
  CHECK(max_abs->range().first == -40.0f);
  CHECK(max_abs->range().second == 40.0f);

  rapidqa::compress::ObserverOptions options;
  options.percentile = 99.9;
  auto percentile = rapidqa::compress::make_observer(ObserverKind::kPercentile, options);
  percentile->observe(x);
  CHECK(percentile->range().second < 4.0f);  // the outlier and the far tail are clipped
  CHECK(percentile->range().second > 2.5f);
  CHECK(percentile->range().first < -2.5f);

  auto entropy = rapidqa::compress::make_observer(ObserverKind::kEntropy);
  entropy->observe(x.narrow(0, 0, 10000));
  entropy->observe(x.narrow(0, 10000, 10000) * 1.5);  // a wider batch regrows the histogram
  const auto [lo, hi] = entropy->range();
  CHECK(hi < 40.0f);
  CHECK(hi > 2.0f);
  CHECK(lo < -2.0f);
  // Clipping the outlier must serve the bulk of the values better than
  // covering it: their quantization error is what the choice is about.
  const at::Tensor bulk = at::cat({x.narrow(0, 0, 5), x.narrow(0, 6, x.numel() - 6)});
  auto error = [&](float a, float b) {
    const auto p = rapidqa::model::affine_qparams(a, b, 0, 255);
    const at::Tensor q = ((bulk / p.scale).round() + p.zero_point).clamp(0, 255);
    return ((q - p.zero_point) * p.scale - bulk).pow(2).mean().item<double>();
  };
  CHECK(error(lo, hi) < error(-40.0f, 40.0f));
  CHECK_FALSE(rapidqa::compress::parse_observer("median").is_ok());
  CHECK(rapidqa::compress::parse_observer("histogram").value() == ObserverKind::kEntropy);
}

TEST_CASE("A quantized linear layer stays within the analytic error bound of FP32", "[quantizer]") {
  c10::InferenceMode inference;
  at::manual_seed(11);
  const std::int64_t k = 96, n = 80, m = 33;
  const at::Tensor w = at::randn({n, k}) * 0.3;
  const at::Tensor b = at::randn({n});
  const at::Tensor x = at::randn({m, k}) * 2.0 + 0.3;
  const at::Tensor exact = at::linear(x, w, b);
  for (const bool dynamic : {true, false}) {
    auto qw = rapidqa::model::quantize_weight_per_channel(w);
    InputQuantization input;
    input.dynamic = dynamic;
    const auto [lo, hi] = at::aminmax(x);
    input.range_min = lo.item<float>();
    input.range_max = hi.item<float>();
    const Int8Linear layer(qw, b, Activation::kNone, input);
    const at::Tensor approx = layer.forward(x);
    // |x w - x~ w~| <= sum |x| dw + sum |w| dx + K dx dw, with dw and dx half
    // a step: rounding is the only error when nothing is clipped.
    const float step_x = rapidqa::model::affine_qparams(input.range_min, input.range_max, 0,
                                                        rapidqa::model::activation_qmax(layer.input_quantization().reduced_range))
                             .scale;
    const at::Tensor dw = qw.scales / 2;  // [n]
    const at::Tensor bound = x.abs().sum(1, true) * dw.unsqueeze(0) + w.abs().sum(1).unsqueeze(0) * (step_x / 2) +
                             static_cast<double>(k) * (step_x / 2) * dw.unsqueeze(0);
    const at::Tensor error = (approx - exact).abs();
    CHECK((error <= bound * 1.001 + 1e-4).all().item<bool>());
    CHECK(error.max().item<float>() > 0);  // it did quantize
    CHECK(rapidqa::compress::output_cosine(exact, approx) > 0.999);
  }
}

TEST_CASE("Large activations produce no saturation error", "[quantizer][saturation]") {
  // Every activation and weight at the top of its range: with full-range u8
  // on a CPU without VNNI, vpmaddubsw's 16-bit pair sums would overflow
  // (255 * 127 * 2 > 32767). ctest also runs this case with
  // ONEDNN_MAX_CPU_ISA=AVX2, where the layer must switch to 7 bits.
  c10::InferenceMode inference;
  const std::int64_t k = 256, n = 64, m = 8;
  at::Tensor w = at::full({n, k}, 0.5f);
  w.narrow(0, 1, 1).fill_(-0.5f);
  const at::Tensor x = at::full({m, k}, 100.0f);
  for (const bool dynamic : {true, false}) {
    InputQuantization input;
    input.dynamic = dynamic;
    input.range_min = 0.0f;
    input.range_max = 100.0f;
    const auto qw = rapidqa::model::quantize_weight_per_channel(w);
    const Int8Linear layer(qw, at::Tensor(), Activation::kNone, input);
    if (std::getenv("ONEDNN_MAX_CPU_ISA")) CHECK(layer.input_quantization().reduced_range);
    CHECK(layer.input_quantization().reduced_range == rapidqa::model::int8_needs_reduced_range());
    // x = 100 is exactly the top of the input range, so the only
    // difference from the dequantized weights' product would be overflow
    // (a saturated sum is off by thousands).
    const at::Tensor out = layer.forward(x);
    const at::Tensor exact = at::linear(x, qw.dequantize());
    CHECK(at::allclose(out, exact, 1e-5, 1e-2));
  }
  // Static inputs beyond the calibrated range are clamped, not wrapped.
  InputQuantization narrow;
  narrow.dynamic = false;
  narrow.range_min = 0.0f;
  narrow.range_max = 10.0f;
  const Int8Linear clamped(rapidqa::model::quantize_weight_per_channel(w), at::Tensor(), Activation::kNone, narrow);
  const at::Tensor out = clamped.forward(x);
  CHECK(out[0][0].item<float>() == Approx(10.0 * 0.5 * k).epsilon(0.01));
  CHECK(out[0][1].item<float>() == Approx(-10.0 * 0.5 * k).epsilon(0.01));
}

TEST_CASE("A fused activation matches FP32 with GELU after the bias", "[quantizer]") {
  c10::InferenceMode inference;
  at::manual_seed(5);
  const at::Tensor w = at::randn({128, 64}) * 0.2, b = at::randn({128});
  const at::Tensor x = at::randn({16, 64});
  const Int8Linear layer(rapidqa::model::quantize_weight_per_channel(w), b, Activation::kGelu, {});
  const rapidqa::model::DenseLinear fp32(w, b, Activation::kGelu);
  CHECK(rapidqa::compress::sqnr_db(fp32.forward(x), layer.forward(x)) > 30.0);
  CHECK(layer.kind() == "int8-dynamic");
  CHECK(layer.weight_bytes() < fp32.weight_bytes() / 2);
}

TEST_CASE("Precision tables choose per layer by name pattern", "[quantizer]") {
  using rapidqa::compress::Precision;
  auto table = rapidqa::compress::PrecisionTable::named_or_file("default").value();
  CHECK(table.lookup("encoder.layer.3.attention.qkv").precision == Precision::kFp32);
  const auto ffn = table.lookup("encoder.layer.3.intermediate");
  CHECK(ffn.precision == Precision::kInt8);
  CHECK(ffn.observer == ObserverKind::kMovingAverage);
  CHECK(ffn.bias_correction);
  CHECK(table.lookup("embeddings.word_embeddings").precision == Precision::kInt8);
  CHECK(table.lookup("pooler").precision == Precision::kFp32);  // unmatched: FP32

  auto bad = rapidqa::compress::PrecisionTable::parse("encoder.*  int8\nencoder.layer.0.*  int4\n", "t.txt");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message().find("t.txt:2") != std::string::npos);
  CHECK(bad.status().message().find("int4") != std::string::npos);
  CHECK_FALSE(rapidqa::compress::PrecisionTable::parse("x int8 observer=bogus", "t").is_ok());
  CHECK_FALSE(rapidqa::compress::PrecisionTable::named_or_file("/no/such/table").is_ok());
}

TEST_CASE("A quantized model saves, loads and answers like the in-memory one", "[quantizer][engine]") {
  const fs::path out = scratch("static");
  rapidqa::QuantizerOptions options;
  options.mode = rapidqa::QuantizationMode::kStatic;
  options.precision_table = "int8";
  options.latency_rows = {16};
  options.calibration_texts = {"where is my order", "how do i reset my password", "can i return a gift",
                               "what payment methods do you accept", "the quick brown fox"};
  std::vector<std::string> progress;
  options.progress = [&](const std::string& line) { progress.push_back(line); };
  auto report = rapidqa::quantize_model(kModels + "/bert-tiny", out.string(), options);
  REQUIRE(report.is_ok());
  CHECK_FALSE(progress.empty());
  CHECK(report->calibration_texts == 5);
  CHECK(report->embedding_cosine_min > 0.99);
  CHECK(report->quantized_weight_bytes < report->fp32_weight_bytes);
  bool saw_static = false;
  for (const auto& l : report->layers) {
    if (l.name == "encoder.layer.0.intermediate") {
      saw_static = l.precision == "int8-static" && l.bias_corrected && l.observer == "moving-average";
      CHECK(l.sqnr_db > 20.0);
      CHECK(l.fp32_microseconds.size() == 1);
    }
  }
  CHECK(saw_static);
  CHECK(report->to_text().find("encoder.layer.1.output") != std::string::npos);

  // The file holds I8 weights with their scales and calibrated ranges, and
  // the tokenizer came along.
  auto file = rapidqa::model::SafetensorsFile::open((out / "model.safetensors").string());
  REQUIRE(file.is_ok());
  CHECK(file->tensors().at("encoder.layer.0.attention.self.query.weight").dtype == "I8");
  CHECK(file->contains("encoder.layer.0.intermediate.dense.weight_scale"));
  CHECK(file->contains("encoder.layer.0.intermediate.dense.input_range"));
  CHECK(file->tensors().at("embeddings.word_embeddings.weight").dtype == "I8");
  CHECK(file->metadata().count("rapidqa.quantization") == 1);
  CHECK(fs::exists(out / "vocab.txt"));

  // Loaded back it is the same INT8 model, and close to FP32.
  auto loaded = rapidqa::model::load_transformer(out.string());
  REQUIRE(loaded.is_ok());
  CHECK((*loaded)->layers[0].intermediate->kind() == "int8-static");
  CHECK((*loaded)->word_embeddings.is_quantized());
  rapidqa::TransformerEncoderOptions fp32_options, int8_options;
  fp32_options.model_dir = kModels + "/bert-tiny";
  int8_options.model_dir = out.string();
  auto fp32 = rapidqa::TransformerEncoder::load(fp32_options).value();
  auto int8 = rapidqa::TransformerEncoder::load(int8_options).value();
  std::vector<float> a, b;
  REQUIRE(fp32->encode(options.calibration_texts, a).is_ok());
  REQUIRE(int8->encode(options.calibration_texts, b).is_ok());
  const at::Tensor va = at::from_blob(a.data(), {5, 32}), vb = at::from_blob(b.data(), {5, 32});
  CHECK(((va * vb).sum(1) > 0.99).all().item<bool>());

  // Quantizing twice, or into the input directory, is refused.
  CHECK_FALSE(rapidqa::quantize_model(out.string(), scratch("twice").string(), options).is_ok());
  CHECK_FALSE(rapidqa::quantize_model(kModels + "/bert-tiny", kModels + "/bert-tiny", options).is_ok());
  options.calibration_texts.clear();
  auto no_text = rapidqa::quantize_model(kModels + "/bert-tiny", scratch("none").string(), options);
  REQUIRE_FALSE(no_text.is_ok());
  CHECK(no_text.status().message().find("calibration") != std::string::npos);
  CHECK_FALSE(fs::exists(scratch("none") / "model.safetensors"));

  // The engine answers with it.
  CHECK(rapidqa::testing::password_entry_answered(int8));
}

TEST_CASE("Auto mode keeps FP32 where INT8 loses more than the budget", "[quantizer]") {
  rapidqa::QuantizerOptions options;
  options.precision_table = "auto";
  options.min_sqnr_db = 200.0;  // nothing quantized can be that close
  options.latency_rows = {};  // no timing: on a busy host a layer this small can be slower in INT8
                              // and keep FP32 for speed, which is not what this test is about
  options.calibration_texts = {"where is my order", "how do i reset my password"};
  // Where the model meets its cosine budget in INT8, auto is every layer
  // INT8, however low a layer's SQNR: it is never slower than int8.
  auto within = rapidqa::quantize_model(kModels + "/bert-tiny", scratch("auto-within").string(), options);
  REQUIRE(within.is_ok());
  CHECK(within->embedding_cosine_min >= options.min_vector_cosine);
  for (const auto& l : within->layers) {
    if (l.name.rfind("encoder.layer.", 0) != 0) continue;
    CHECK(l.precision == "int8-dynamic");
  }
  // A budget no INT8 model meets sends back every layer below min_sqnr_db.
  options.min_vector_cosine = 1.0;
  const fs::path out = scratch("auto");
  auto report = rapidqa::quantize_model(kModels + "/bert-tiny", out.string(), options);
  REQUIRE(report.is_ok());
  for (const auto& l : report->layers) {
    if (l.name.rfind("encoder.layer.", 0) != 0) continue;
    CHECK(l.precision == "fp32");
    CHECK(l.note.find("misses the cosine budget 1 in INT8, and this layer's SQNR") != std::string::npos);
  }
  auto loaded = rapidqa::model::load_transformer(out.string());
  REQUIRE(loaded.is_ok());
  CHECK((*loaded)->layers[0].qkv->kind().rfind("f32", 0) == 0);

  // Between the two: the fewest lowest-SQNR layers go back until the
  // budget holds, those below min_sqnr_db first.
  // A budget halfway between every encoder layer in INT8 and none (only
  // the embeddings) needs some of them back.
  options.min_sqnr_db = 0.0;
  REQUIRE(report->embedding_cosine_min > within->embedding_cosine_min);
  options.min_vector_cosine = (within->embedding_cosine_min + report->embedding_cosine_min) / 2;
  auto some = rapidqa::quantize_model(kModels + "/bert-tiny", scratch("auto-some").string(), options);
  REQUIRE(some.is_ok());
  INFO("cosine with every encoder layer INT8 " << within->embedding_cosine_min << ", with none "
                                               << report->embedding_cosine_min << "\n" << some->to_text());
  CHECK(some->embedding_cosine_min >= options.min_vector_cosine);
  std::vector<double> fp32_sqnr, int8_sqnr;
  for (const auto& l : some->layers) {
    if (l.name.rfind("encoder.layer.", 0) != 0) continue;
    (l.precision == "fp32" ? fp32_sqnr : int8_sqnr).push_back(l.sqnr_db);
    if (l.precision == "fp32") CHECK(l.note.find("lowest that go back to FP32") != std::string::npos);
  }
  CHECK_FALSE(fp32_sqnr.empty());
  CHECK_FALSE(int8_sqnr.empty());
  if (!fp32_sqnr.empty() && !int8_sqnr.empty()) {
    CHECK(*std::max_element(fp32_sqnr.begin(), fp32_sqnr.end()) <= *std::min_element(int8_sqnr.begin(), int8_sqnr.end()));
  }
  options.min_vector_cosine = 1.5;
  auto bad = rapidqa::quantize_model(kModels + "/bert-tiny", scratch("auto-bad").string(), options);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message().find("min_vector_cosine must be a cosine in [-1, 1]") != std::string::npos);
}

TEST_CASE("Every model family quantizes and answers through the engine and the reader", "[quantizer][engine][families]") {
  const std::vector<std::string> texts = {"where is my order", "how do i reset my password", "can i return a gift",
                                          "the quick brown fox"};
  for (const std::string family : {"roberta-tiny", "camembert-tiny-sharded-bin", "electra-tiny", "mpnet-tiny"}) {
    INFO(family);
    rapidqa::QuantizerOptions options;
    options.precision_table = "int8";
    options.latency_rows = {16};
    options.calibration_texts = texts;
    const fs::path out = scratch("family-" + family);
    auto report = rapidqa::quantize_model(kModels + "/" + family, out.string(), options);
    REQUIRE(report.is_ok());
    CHECK(report->quantized_weight_bytes < report->fp32_weight_bytes);
    // The saved model keeps its family (config.json) and its own tensors.
    auto loaded = rapidqa::model::load_transformer(out.string());
    REQUIRE(loaded.is_ok());
    auto original = rapidqa::model::load_transformer(kModels + "/" + family);
    REQUIRE(original.is_ok());
    CHECK((*loaded)->config.model_type == (*original)->config.model_type);
    CHECK((*loaded)->config.position_offset == (*original)->config.position_offset);
    CHECK((*loaded)->relative_attention_bias.defined() == (*original)->relative_attention_bias.defined());
    CHECK(((*loaded)->embedding_projection != nullptr) == ((*original)->embedding_projection != nullptr));
    rapidqa::TransformerEncoderOptions fp32_options, int8_options;
    fp32_options.model_dir = kModels + "/" + family;
    int8_options.model_dir = out.string();
    auto fp32 = rapidqa::TransformerEncoder::load(fp32_options);
    auto int8 = rapidqa::TransformerEncoder::load(int8_options);
    REQUIRE(fp32.is_ok());
    REQUIRE(int8.is_ok());
    std::vector<float> a, b;
    REQUIRE((*fp32)->encode(texts, a).is_ok());
    REQUIRE((*int8)->encode(texts, b).is_ok());
    const auto n = static_cast<std::int64_t>(texts.size());
    const at::Tensor va = at::from_blob(a.data(), {n, 32}), vb = at::from_blob(b.data(), {n, 32});
    CHECK(((va * vb).sum(1) > 0.98).all().item<bool>());

    // The engine answers with the quantized encoder.
    CHECK(rapidqa::testing::password_entry_answered(*int8));
  }
  // The pruner fine-tunes with the trainer, which runs every family but
  // DistilBERT (structured_pruning_test.cpp prunes the others): DistilBERT
  // is refused before any work, with the reason.
  rapidqa::PrunerOptions prune;
  prune.knowledge_file = RAPIDQA_TEST_FAQ;
  auto pruned = rapidqa::prune_model(kModels + "/distilbert-tiny", scratch("prune-distilbert").string(), prune);
  REQUIRE_FALSE(pruned.is_ok());
  CHECK(pruned.status().message().find("the pruner fine-tunes with the trainer, and model_type 'distilbert' cannot "
                                       "be trained") != std::string::npos);
  // Question-answering heads of the new families read spans out of passages.
  for (const std::string qa : {"xlm-roberta-tiny-qa-sharded", "electra-tiny-qa-bin"}) {
    INFO(qa);
    rapidqa::ExtractiveReaderOptions options;
    options.model_dir = kModels + "/" + qa;
    auto reader = rapidqa::ExtractiveReader::load(options);
    REQUIRE(reader.is_ok());
    const std::string passage = "Your order shipped yesterday and will arrive soon.";
    auto spans = (*reader)->read("where is my order", {passage}, 3);
    REQUIRE(spans.is_ok());
    REQUIRE_FALSE(spans->empty());
    const auto& best = spans->front();
    CHECK(best.end > best.begin);
    CHECK(passage.substr(best.begin, best.end - best.begin) == best.text);
  }
}
