// Shared helpers for the Catch2 tests.
#pragma once

#include <string>

namespace rapidqa::testing {

inline std::string source_path(const std::string& relative) { return std::string(RAPIDQA_SOURCE_DIR) + "/" + relative; }
inline std::string bundled_faq() { return source_path("examples/data/faq.jsonl"); }
inline std::string bundled_paraphrases() { return source_path("examples/data/faq_paraphrases.jsonl"); }

}  // namespace rapidqa::testing
