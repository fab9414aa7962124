// Stage 1, normalisation: normalize_text on typical English and Chinese FAQ
// questions (NFKC, case folding, punctuation, white space). And the base64
// codec a remote encoder's vectors travel in, beside OpenSSL's:
//   BM_Base64Encode/codec:C, BM_Base64Decode/codec:C  (C: 0 rapidqa, 1 OpenSSL),
// over a batch of 64 384-dimensional float vectors (98,304 bytes).
#include <benchmark/benchmark.h>
#include <openssl/evp.h>

#include <random>
#include <string>
#include <vector>

#include "bench_data.h"
#include "rapidqa/base64.h"
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

const std::string& vector_batch_bytes() {
  static const std::string bytes = [] {
    std::mt19937 rng(3);
    std::normal_distribution<float> value;
    std::vector<float> v(64 * 384);
    for (float& x : v) x = value(rng);
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  }();
  return bytes;
}

void BM_Base64Encode(benchmark::State& state) {
  const std::string& bytes = vector_batch_bytes();
  const bool openssl = state.range(0) == 1;
  std::string out;
  for (auto _ : state) {
    out.clear();
    if (openssl) {
      out.resize((bytes.size() + 2) / 3 * 4 + 1);
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(bytes.data()),
                      static_cast<int>(bytes.size()));
    } else {
      rapidqa::append_base64(bytes.data(), bytes.size(), out);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
  state.SetLabel(openssl ? "OpenSSL EVP_EncodeBlock" : "rapidqa");
}

void BM_Base64Decode(benchmark::State& state) {
  std::string text;
  rapidqa::append_base64(vector_batch_bytes().data(), vector_batch_bytes().size(), text);
  const bool openssl = state.range(0) == 1;
  std::string out;
  for (auto _ : state) {
    if (openssl) {
      out.resize(text.size() / 4 * 3);
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(text.data()),
                      static_cast<int>(text.size()));
    } else if (!rapidqa::base64_decode(text, out).is_ok()) {
      state.SkipWithError("base64_decode failed");
      break;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * vector_batch_bytes().size()));
  state.SetLabel(openssl ? "OpenSSL EVP_DecodeBlock" : "rapidqa");
}

}  // namespace

BENCHMARK(BM_Base64Encode)->ArgName("codec")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Base64Decode)->ArgName("codec")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NormalizeEnglish)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NormalizeChinese)->Unit(benchmark::kMicrosecond);
