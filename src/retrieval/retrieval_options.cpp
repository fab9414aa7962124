#include "rapidqa/retrieval_options.h"

#include <utility>

#include <fmt/format.h>

#include "common/bounded_json.h"

namespace rapidqa {
namespace {

constexpr std::pair<const char*, RetrievalFusion> kFusionNames[] = {
    {"dense", RetrievalFusion::kDense},
    {"rrf", RetrievalFusion::kReciprocalRank},
    {"fitted", RetrievalFusion::kFitted},
};

}  // namespace

const char* retrieval_fusion_name(RetrievalFusion fusion) noexcept {
  for (const auto& [name, known] : kFusionNames) {
    if (known == fusion) return name;
  }
  return "unknown";
}

Result<RetrievalFusion> retrieval_fusion_from_name(const std::string& name) {
  for (const auto& [known, fusion] : kFusionNames) {
    if (name == known) return fusion;
  }
  return Status::invalid_argument(
      fmt::format("retrieval fusion '{}' is not fitted, rrf or dense", detail::clip_for_message(name)));
}

}  // namespace rapidqa
