#include "rapidqa/answer.h"

namespace rapidqa {

const char* answer_tier_name(AnswerTier tier) noexcept {
  switch (tier) {
    case AnswerTier::kResultCache: return "result_cache";
    case AnswerTier::kSemanticCache: return "semantic_cache";
    case AnswerTier::kKnowledge: return "knowledge";
    case AnswerTier::kFallback: return "fallback";
    case AnswerTier::kKnowledgeCache: return "knowledge_cache";
  }
  return "unknown";
}

const char* stage_name(Stage stage) noexcept {
  switch (stage) {
    case Stage::kNormalize: return "normalize";
    case Stage::kResultCache: return "result_cache";
    case Stage::kEncode: return "encode";
    case Stage::kSemanticCache: return "semantic_cache";
    case Stage::kRetrieve: return "retrieve";
    case Stage::kInfer: return "infer";
    case Stage::kPostprocess: return "postprocess";
    case Stage::kTotal: return "total";
  }
  return "unknown";
}

}  // namespace rapidqa
