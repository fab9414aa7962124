// Stage 2, encoding: HashingEncoder::encode_one on normalised questions,
// with IDF weights learned from a 10k-entry generated knowledge base, as
// the engine has them after load_knowledge.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "bench_data.h"
#include "rapidqa/hashing_encoder.h"
#include "rapidqa/text_normalizer.h"

namespace {

const rapidqa::HashingEncoder& adapted_encoder() {
  static const std::unique_ptr<rapidqa::HashingEncoder> encoder = [] {
    auto e = rapidqa::HashingEncoder::create().value();
    std::vector<std::string> corpus;
    for (const auto& entry : rapidqa::bench::generated_entries(10000)) {
      corpus.push_back(rapidqa::normalize_text(entry.question).value());
      for (const auto& alt : entry.alternates) corpus.push_back(rapidqa::normalize_text(alt).value());
    }
    e->adapt(corpus);
    return e;
  }();
  return *encoder;
}

std::vector<std::string> normalized(const std::vector<std::string>& questions) {
  std::vector<std::string> out;
  for (const auto& q : questions) out.push_back(rapidqa::normalize_text(q).value());
  return out;
}

void encode_all(benchmark::State& state, const std::vector<std::string>& texts) {
  const auto& encoder = adapted_encoder();
  std::vector<float> vector(encoder.dimension());
  std::size_t i = 0;
  for (auto _ : state) {
    auto s = encoder.encode_one(texts[i++ % texts.size()], vector.data());
    if (!s.is_ok()) {
      state.SkipWithError(("encode_one failed: " + s.to_string()).c_str());
      break;
    }
    benchmark::DoNotOptimize(vector.data());
    benchmark::ClobberMemory();
  }
}

void BM_EncodeEnglish(benchmark::State& state) {
  encode_all(state, normalized(rapidqa::bench::english_questions()));
}
void BM_EncodeChinese(benchmark::State& state) {
  encode_all(state, normalized(rapidqa::bench::chinese_questions()));
}
// The generated questions the engine benchmarks ask (8 content words and a topic number).
void BM_EncodeGenerated(benchmark::State& state) {
  std::vector<std::string> questions;
  for (std::size_t i = 0; i < 64; ++i) questions.push_back(rapidqa::bench::paraphrase_of(i, 1));
  encode_all(state, normalized(questions));
}

}  // namespace

BENCHMARK(BM_EncodeEnglish)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EncodeChinese)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EncodeGenerated)->Unit(benchmark::kMicrosecond);
