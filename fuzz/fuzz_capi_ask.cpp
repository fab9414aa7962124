// Feeds the C ABI's ask path as a foreign caller would: one engine, made
// once from the bundled examples/data/faq.jsonl, asked the input's question
// through rqa_engine_ask_with (and rqa_engine_ask, rqa_engine_ask_tenant,
// rqa_engine_encode). Input layout (fuzz/make_seeds.cpp writes seeds):
//
//   byte 0       flags: bit 0 use_cache, bits 1-2 priority (3 is invalid),
//                bit 3 set semantic_threshold, bit 4 set timeout_ms,
//                bit 5 pass no options (NULL)
//   bytes 1-4    semantic_threshold, raw float32 (NaN and infinities too)
//   bytes 5-12   timeout_ms, raw float64
//   then         tenant, up to the first '\n'; the rest is the question
//
// Inputs shorter than 13 bytes are a question asked with default options.
// The question and tenant are C strings: an embedded NUL ends them, as it
// would for any C caller. The engine and its caches live across inputs, so
// the cache tiers see repeated and near-repeated questions.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_support.h"
#include "rapidqa/rapidqa.h"

namespace {

rqa_engine* make_engine() {
  using rapidqa::fuzz::check;
  rqa_engine_options options;
  rqa_engine_options_init(&options);
  options.intra_op_threads = 1;
  rqa_engine* engine = nullptr;
  check(rqa_engine_create(&options, &engine) == RQA_OK, "rqa_engine_create failed", rqa_last_error());
  check(rqa_engine_load_knowledge(engine, RAPIDQA_FAQ, nullptr) == RQA_OK, "cannot load the FAQ", rqa_last_error());
  return engine;
}

void check_answer(rqa_status status, rqa_answer* answer) {
  using rapidqa::fuzz::check;
  if (status != RQA_OK) {
    check(answer == nullptr, "a failed ask returned an answer");
    check(rqa_last_error() != nullptr && rqa_last_error()[0] != '\0', "a failed ask left no error message");
    return;
  }
  check(answer != nullptr, "a successful ask returned no answer");
  check(rqa_answer_text(answer) != nullptr && rqa_answer_entry_id(answer) != nullptr &&
            rqa_answer_degraded_reason(answer) != nullptr,
        "an answer string is NULL");
  const rqa_tier tier = rqa_answer_tier(answer);
  check(tier >= RQA_TIER_RESULT_CACHE && tier <= RQA_TIER_KNOWLEDGE_CACHE, "an answer's tier is out of range");
  (void)rqa_tier_name(tier);
  (void)rqa_answer_score(answer);
  (void)rqa_answer_degraded(answer);
  (void)rqa_answer_total_microseconds(answer);
  rqa_answer_destroy(answer);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static rqa_engine* const engine = make_engine();
  constexpr std::size_t kHeader = 13;
  rqa_ask_options options;
  rqa_ask_options_init(&options);
  std::string tenant, question;
  const rqa_ask_options* passed = &options;
  if (size < kHeader) {
    question.assign(reinterpret_cast<const char*>(data), size);
  } else {
    const std::uint8_t flags = data[0];
    options.use_cache = flags & 1;
    options.priority = (flags >> 1) & 3;
    if (flags & 8) std::memcpy(&options.semantic_threshold, data + 1, sizeof(float));
    if (flags & 16) std::memcpy(&options.timeout_ms, data + 5, sizeof(double));
    if (flags & 32) passed = nullptr;
    const std::string rest(reinterpret_cast<const char*>(data + kHeader), size - kHeader);
    const auto newline = rest.find('\n');
    tenant = newline == std::string::npos ? std::string() : rest.substr(0, newline);
    question = newline == std::string::npos ? rest : rest.substr(newline + 1);
  }
  options.tenant = tenant.c_str();

  rqa_answer* answer = nullptr;
  check_answer(rqa_engine_ask_with(engine, question.c_str(), passed, &answer), answer);
  answer = nullptr;
  check_answer(rqa_engine_ask_tenant(engine, question.c_str(), tenant.c_str(), &answer), answer);
  answer = nullptr;
  check_answer(rqa_engine_ask(engine, question.c_str(), &answer), answer);

  float vector[512];
  std::size_t dimension = 0;
  (void)rqa_engine_encode(engine, question.c_str(), vector, sizeof vector / sizeof vector[0], &dimension);
  return 0;
}
