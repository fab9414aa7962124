// Stage 1, normalisation: normalize_text on typical English and Chinese FAQ
// questions (NFKC, case folding, punctuation, white space).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench_data.h"
#include "rapidqa/text_normalizer.h"

namespace {

void normalize_all(benchmark::State& state, const std::vector<std::string>& questions) {
  std::size_t i = 0;
  std::int64_t bytes = 0;
  for (auto _ : state) {
    const std::string& q = questions[i++ % questions.size()];
    auto normalized = rapidqa::normalize_text(q);
    if (!normalized) {
      state.SkipWithError(("normalize_text failed: " + normalized.status().to_string()).c_str());
      break;
    }
    benchmark::DoNotOptimize(normalized.value().data());
    bytes += static_cast<std::int64_t>(q.size());
  }
  state.SetBytesProcessed(bytes);
}

void BM_NormalizeEnglish(benchmark::State& state) { normalize_all(state, rapidqa::bench::english_questions()); }
void BM_NormalizeChinese(benchmark::State& state) { normalize_all(state, rapidqa::bench::chinese_questions()); }

}  // namespace

BENCHMARK(BM_NormalizeEnglish)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NormalizeChinese)->Unit(benchmark::kMicrosecond);
