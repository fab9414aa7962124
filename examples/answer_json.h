// An Answer as JSON, the one shape every tool and the server print: the
// text, where it came from (tier, entry, matches with versions), whether a
// cheaper path was taken and why, and each stage's time in microseconds.
#pragma once

#include <chrono>

#include <nlohmann/json.hpp>
#include <rapidqa/answer.h>

namespace rapidqa::tools {

inline nlohmann::json answer_to_json(const Answer& a) {
  nlohmann::json stages = nlohmann::json::object();
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const auto stage = static_cast<Stage>(i);
    stages[stage_name(stage)] = std::chrono::duration<double, std::micro>(a.timings[stage]).count();
  }
  nlohmann::json matches = nlohmann::json::array();
  for (const auto& m : a.matches) {
    matches.push_back({{"entry_id", m.entry_id}, {"score", m.score}, {"version", m.version}});
  }
  return {{"answer", a.text},
          {"entry_id", a.entry_id()},
          {"score", a.score},
          {"confidence", a.confidence},
          {"tier", answer_tier_name(a.tier)},
          {"fallback_reason", a.fallback_reason},
          {"cache_decision", a.cache_decision},
          {"degraded", a.degraded},
          {"generated", a.generated},
          {"degraded_reason", a.degraded_reason},
          {"matches", matches},
          {"stage_us", stages},
          {"extracted_from", a.extracted ? a.extracted->entry_id : std::string()}};
}

}  // namespace rapidqa::tools
