#include "train/faq_split.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

namespace rapidqa::train {
namespace {

// A hash fixed by its definition (std::hash is not), so a seed holds back
// the same phrasings on every platform and standard library.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t hash_id(const std::string& id, std::uint64_t seed) {
  std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (unsigned char c : id) h = (h ^ c) * 0x100000001B3ull;
  return mix(h ^ mix(seed));
}

}  // namespace

Result<FaqSplit> split_faq(const std::vector<KnowledgeEntry>& entries, const FaqSplitOptions& options) {
  if (entries.empty()) return Status::invalid_argument("the knowledge base has no entries to split");
  FaqSplit split;
  std::unordered_map<std::string, std::size_t> entry_of_id;
  std::unordered_map<std::string, std::size_t> entry_of_text;
  for (std::size_t e = 0; e < entries.size(); ++e) {
    const KnowledgeEntry& entry = entries[e];
    if (!entry_of_id.emplace(entry.id, e).second) {
      return Status::invalid_argument(fmt::format("entry id '{}' appears twice", entry.id));
    }
    split.entry_ids.push_back(entry.id);
    std::vector<std::string> phrasings;  // distinct, question first
    for (std::size_t i = 0; i <= entry.alternates.size(); ++i) {
      const std::string& text = i == 0 ? entry.question : entry.alternates[i - 1];
      const auto [it, inserted] = entry_of_text.emplace(text, e);
      if (!inserted && it->second != e) {
        return Status::invalid_argument(fmt::format("the phrasing '{}' belongs to both '{}' and '{}'", text,
                                                    entries[it->second].id, entry.id));
      }
      if (inserted) phrasings.push_back(text);
    }
    std::size_t held = phrasings.size();  // none
    if (phrasings.size() >= std::max<std::size_t>(2, options.min_phrasings_to_hold_back)) {
      held = 1 + static_cast<std::size_t>(hash_id(entry.id, options.seed) % (phrasings.size() - 1));
    }
    for (std::size_t i = 0; i < phrasings.size(); ++i) {
      (i == held ? split.held_back : split.training).push_back({phrasings[i], e});
    }
    if (options.answers_as_companions && !entry.answer.empty()) split.companions.push_back({entry.answer, e});
  }
  return split;
}

Result<RetrievalAccuracy> top1_accuracy(const EncodeFn& encode, const FaqSplit& split) {
  if (split.training.empty() || split.held_back.empty()) {
    return Status::invalid_argument(fmt::format("the split has {} training and {} held-back phrasings; both are needed",
                                                split.training.size(), split.held_back.size()));
  }
  // Rows normalised to unit length, so a dot product is the cosine.
  auto encode_rows = [&](const std::vector<Phrasing>& phrasings, std::size_t& width) -> Result<std::vector<float>> {
    std::vector<std::string> texts;
    texts.reserve(phrasings.size());
    for (const Phrasing& p : phrasings) texts.push_back(p.text);
    std::vector<float> rows;
    if (Status s = encode(texts, rows); !s) return s;
    if (rows.empty() || rows.size() % texts.size() != 0) {
      return Status::invalid_argument(fmt::format("the encoder returned {} floats for {} texts (not whole rows)",
                                                  rows.size(), texts.size()));
    }
    width = rows.size() / texts.size();
    for (std::size_t r = 0; r < texts.size(); ++r) {
      float* row = rows.data() + r * width;
      double norm = 0;
      for (std::size_t i = 0; i < width; ++i) norm += static_cast<double>(row[i]) * row[i];
      const float scale = norm > 0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
      for (std::size_t i = 0; i < width; ++i) row[i] *= scale;
    }
    return rows;
  };
  std::size_t index_width = 0, query_width = 0;
  auto index = encode_rows(split.training, index_width);
  if (!index) return index.status();
  auto queries = encode_rows(split.held_back, query_width);
  if (!queries) return queries.status();
  if (index_width != query_width) {
    return Status::invalid_argument(
        fmt::format("the encoder returned {} floats per index text but {} per query", index_width, query_width));
  }
  RetrievalAccuracy accuracy;
  accuracy.queries = split.held_back.size();
  for (std::size_t q = 0; q < split.held_back.size(); ++q) {
    const float* query = queries->data() + q * query_width;
    std::size_t best = 0;
    float best_score = -2.0f;
    for (std::size_t i = 0; i < split.training.size(); ++i) {
      const float* row = index->data() + i * index_width;
      float score = 0;
      for (std::size_t d = 0; d < index_width; ++d) score += query[d] * row[d];
      if (score > best_score) {
        best_score = score;
        best = i;
      }
    }
    if (split.training[best].entry == split.held_back[q].entry) ++accuracy.correct;
  }
  return accuracy;
}

std::uint64_t training_split_seed(const std::string& model_dir, std::uint64_t fallback) {
  std::ifstream in(model_dir + "/training_summary.json");
  if (!in) return fallback;
  try {
    const auto j = nlohmann::json::parse(in);
    if (j.contains("seed") && j.at("seed").is_number_unsigned()) return j.at("seed").get<std::uint64_t>();
  } catch (const std::exception&) {
    // An unreadable summary says nothing about the seed.
  }
  return fallback;
}

}  // namespace rapidqa::train
