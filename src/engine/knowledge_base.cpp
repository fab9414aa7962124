#include "engine/knowledge_base.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include <fmt/format.h>

#include "common/bounded_json.h"

namespace rapidqa::engine {
namespace {

std::vector<const std::string*> phrasings_of(const KnowledgeEntry& e) {
  std::vector<const std::string*> out{&e.question};
  for (const auto& alt : e.alternates) out.push_back(&alt);
  return out;
}

// The key the BM25 index groups an entry's phrasings by.
std::uint64_t entry_key(const std::string& id) { return std::hash<std::string>{}(id); }

// How many phrasings calibrate() asks, and how many neighbours a dense
// search fetches for each (its own entry's phrasings are left out after).
constexpr std::size_t kCalibrationProbes = 1000;
constexpr std::size_t kCalibrationBreadth = 32;
// A cosine this close to 1 repeats a stored phrasing (the ranker tells
// repetition by the words; the vector index only by the cosine).
constexpr float kRepeatedPhrasingCosine = 0.9999f;

index::VectorIndexOptions index_options(std::size_t dimension, const KnowledgeBaseOptions& o) {
  index::VectorIndexOptions io;
  io.dimension = dimension;
  io.exact_limit = o.exact_limit;
  io.hnsw_search_breadth = o.search_breadth;
  return io;
}

}  // namespace

KnowledgeBase::KnowledgeBase(std::shared_ptr<Encoder> encoder, KnowledgeBaseOptions options)
    : encoder_(std::move(encoder)), options_(options), index_(index_options(encoder_->dimension(), options)) {
  if (options_.retrieval.fusion != RetrievalFusion::kDense) {
    ranker_ = std::make_unique<retrieval::HybridRanker>(options_.retrieval, options_.words);
  }
}

std::string KnowledgeBase::lexical_text(const std::string& phrasing) const {
  auto normalized = normalize_text(phrasing, options_.normalize);
  return normalized ? std::move(normalized).value() : std::string();
}

std::string KnowledgeBase::ranking_summary() const {
  return ranker_summary() + "; " + calibration_.summary();
}

std::string KnowledgeBase::ranker_summary() const {
  switch (options_.retrieval.fusion) {
    case RetrievalFusion::kDense:
      return "the encoder's cosine";
    case RetrievalFusion::kReciprocalRank:
      return "reciprocal rank fusion of BM25 and the encoder's cosine";
    case RetrievalFusion::kFitted:
      break;
  }
  const retrieval::RankerFit& f = ranker_fit_;
  if (f.questions == 0) {
    return "fitted ranker: no entry has two phrasings to fit on, so BM25 order with the cosine as tie-breaker";
  }
  const char* chosen = f.choice == retrieval::RankerChoice::kFitted   ? "the fitted weights"
                       : f.choice == retrieval::RankerChoice::kCosine ? "the cosine alone"
                                                                      : "BM25 order with the cosine as tie-breaker";
  return fmt::format(
      "fitted ranker: {}; asking {} phrasings for their entries, held out, right first: fitted {}, cosine {}, BM25 "
      "{}",
      chosen, f.held_out_questions, f.held_out_right_fitted, f.held_out_right_cosine, f.held_out_right_prior);
}

void KnowledgeBase::rebuild_ranking() {
  if (ranker_) rebuild_ranker();
  calibrate();
}

void KnowledgeBase::rebuild_ranker() {
  retrieval::LexicalIndex& lexical = ranker_->lexical();
  lexical.clear();
  // In id order, so the fit does not depend on the map's hash order.
  std::vector<const StoredEntry*> stored;
  stored.reserve(entries_.size());
  for (const auto& [id, se] : entries_) stored.push_back(&se);
  std::sort(stored.begin(), stored.end(), [](const StoredEntry* a, const StoredEntry* b) { return a->entry.id < b->entry.id; });
  std::vector<std::vector<std::int64_t>> groups;
  groups.reserve(stored.size());
  for (const StoredEntry* se : stored) {
    const auto phrasings = phrasings_of(se->entry);
    for (std::size_t j = 0; j < se->labels.size() && j < phrasings.size(); ++j) {
      lexical.add(se->labels[j], lexical_text(*phrasings[j]), entry_key(se->entry.id));
    }
    groups.push_back(se->labels);
  }
  lexical.refresh_weights();
  ranker_fit_ = ranker_->fit(groups, index_);
}

Result<std::string> KnowledgeBase::encoder_input(const std::string& phrasing) const {
  // Always normalised, so a phrasing the question path would refuse (empty,
  // oversize, invalid UTF-8) is refused here too; a transformer then reads
  // the text as written.
  auto normalized = normalize_text(phrasing, options_.normalize);
  if (!normalized) {
    return Status::invalid_argument(
        fmt::format("phrasing \"{}\": {}", detail::clip_for_message(phrasing), normalized.status().message()));
  }
  if (!encoder_->wants_normalized_text()) return phrasing;
  return normalized;
}

Status KnowledgeBase::encode_phrasings(const std::vector<const KnowledgeEntry*>& entries, Encoded& out,
                                       std::vector<std::size_t>* phrasing_counts, bool refit_encoder) const {
  // Every phrasing is checked before anything is encoded, so an error
  // leaves the encoder and the index untouched.
  for (const KnowledgeEntry* e : entries) {
    for (const std::string* phrasing : phrasings_of(*e)) {
      auto text = encoder_input(*phrasing);
      if (!text) return Status::invalid_argument(fmt::format("entry '{}': {}", e->id, text.status().message()));
      out.normalized.push_back(std::move(text).value());
    }
    if (phrasing_counts) phrasing_counts->push_back(1 + e->alternates.size());
  }
  if (refit_encoder) encoder_->adapt(out.normalized);
  return encoder_->encode(out.normalized, out.vectors);
}

Status KnowledgeBase::check_phrasings(const KnowledgeEntry& entry) const {
  for (const std::string* phrasing : phrasings_of(entry)) {
    auto text = encoder_input(*phrasing);
    if (!text) return Status::invalid_argument(fmt::format("entry '{}': {}", entry.id, text.status().message()));
  }
  return Status::ok();
}

Status KnowledgeBase::replace_all(std::vector<KnowledgeEntry> entries, const EncodeProgress& progress) {
  // Every id and phrasing is checked before the encoder learns from them,
  // so a bad entry leaves the encoder as it was.
  std::unordered_set<std::string> ids;
  std::vector<std::string> corpus;
  for (const auto& e : entries) {
    if (!ids.insert(e.id).second) return Status::already_exists(fmt::format("duplicate entry id '{}'", e.id));
    for (const std::string* phrasing : phrasings_of(e)) {
      auto text = encoder_input(*phrasing);
      if (!text) return Status::invalid_argument(fmt::format("entry '{}': {}", e.id, text.status().message()));
      corpus.push_back(std::move(text).value());
    }
  }
  encoder_->adapt(corpus);
  corpus = {};
  auto replaced = replace_all_reusing(std::move(entries), {}, progress);
  return replaced ? Status::ok() : replaced.status();
}

Result<std::vector<std::string>> KnowledgeBase::replace_all_reusing(std::vector<KnowledgeEntry> entries, const KnownVectors& known,
                                                       const EncodeProgress& progress) {
  std::unordered_set<std::string> ids;
  for (const auto& e : entries) {
    if (!ids.insert(e.id).second) return Status::already_exists(fmt::format("duplicate entry id '{}'", e.id));
  }
  const std::size_t dim = encoder_->dimension();
  // Which entries have usable vectors, and where each entry's rows start.
  std::vector<const StoredVectors*> reused(entries.size(), nullptr);
  std::vector<std::size_t> first_row(entries.size());
  std::vector<std::size_t> to_encode;
  std::size_t rows = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].version == 0) entries[i].version = 1;
    const std::size_t phrasings = 1 + entries[i].alternates.size();
    first_row[i] = rows;
    rows += phrasings;
    const auto it = known.find(entries[i].id);
    if (it != known.end() && it->second->version == entries[i].version && it->second->dimension == dim &&
        it->second->values.size() == phrasings * dim) {
      reused[i] = it->second;
    } else {
      to_encode.push_back(i);
    }
  }
  std::vector<float> vectors(rows * dim);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (reused[i]) std::copy(reused[i]->values.begin(), reused[i]->values.end(), vectors.begin() + first_row[i] * dim);
  }
  // The rest, a thousand entries per encoder call, so a long encode shows
  // progress and a bad entry stops it early.
  constexpr std::size_t kChunk = 1000;
  for (std::size_t begin = 0; begin < to_encode.size(); begin += kChunk) {
    const std::size_t end = std::min(to_encode.size(), begin + kChunk);
    std::vector<const KnowledgeEntry*> chunk;
    for (std::size_t k = begin; k < end; ++k) chunk.push_back(&entries[to_encode[k]]);
    Encoded encoded;
    if (Status s = encode_phrasings(chunk, encoded, nullptr, /*refit_encoder=*/false); !s.is_ok()) return s;
    std::size_t row = 0;
    for (std::size_t k = begin; k < end; ++k) {
      const std::size_t i = to_encode[k];
      const std::size_t phrasings = 1 + entries[i].alternates.size();
      std::copy(encoded.vectors.begin() + row * dim, encoded.vectors.begin() + (row + phrasings) * dim,
                vectors.begin() + first_row[i] * dim);
      row += phrasings;
    }
    if (progress) progress(end, to_encode.size());
  }

  index::VectorIndex fresh(index_options(dim, options_));
  std::unordered_map<std::string, StoredEntry> stored;
  std::unordered_map<std::int64_t, const StoredEntry*> entry_of_label;
  stored.reserve(entries.size());
  entry_of_label.reserve(rows);
  std::vector<std::int64_t> labels(rows);
  std::vector<std::string> stored_ids(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    stored_ids[i] = entries[i].id;
    const std::string id = entries[i].id;
    StoredEntry& se = stored[id];
    const std::size_t phrasings = 1 + entries[i].alternates.size();
    for (std::size_t j = 0; j < phrasings; ++j) {
      const auto label = static_cast<std::int64_t>(first_row[i] + j);
      se.labels.push_back(label);
      labels[first_row[i] + j] = label;
      entry_of_label.emplace(label, &se);
    }
    se.entry = std::move(entries[i]);
  }
  std::vector<std::string> encoded_ids;
  encoded_ids.reserve(to_encode.size());
  for (const std::size_t i : to_encode) encoded_ids.push_back(stored_ids[i]);
  fresh.add_batch(labels, vectors.data());
  index_ = std::move(fresh);
  entries_ = std::move(stored);
  entry_of_label_ = std::move(entry_of_label);
  next_label_ = static_cast<std::int64_t>(rows);
  rebuild_ranking();
  return encoded_ids;
}

Status KnowledgeBase::store(KnowledgeEntry entry, std::uint64_t version) {
  // Encode before touching the index, so a bad entry leaves the old one in place.
  Encoded encoded;
  Status s = encode_phrasings({&entry}, encoded, nullptr, false);
  if (!s.is_ok()) return s;
  entry.version = version;
  StoredEntry& stored = entries_[entry.id];
  erase_labels(stored);
  const std::size_t dim = encoder_->dimension();
  const auto phrasings = phrasings_of(entry);
  for (std::size_t j = 0; j < encoded.normalized.size(); ++j) {
    const std::int64_t label = next_label_++;
    index_.upsert(label, encoded.vectors.data() + j * dim);
    if (ranker_) ranker_->lexical().add(label, lexical_text(*phrasings[j]), entry_key(entry.id));
    entry_of_label_.emplace(label, &stored);
    stored.labels.push_back(label);
  }
  stored.entry = std::move(entry);
  return Status::ok();
}

void KnowledgeBase::erase_labels(StoredEntry& stored) {
  for (auto label : stored.labels) {
    index_.remove(label);
    if (ranker_) ranker_->lexical().remove(label);
    entry_of_label_.erase(label);
  }
  stored.labels.clear();
}

Status KnowledgeBase::add(KnowledgeEntry entry) {
  if (entries_.count(entry.id)) return Status::already_exists(fmt::format("entry id '{}' already exists", entry.id));
  return store(std::move(entry), 1);
}

Status KnowledgeBase::update(KnowledgeEntry entry) {
  const auto it = entries_.find(entry.id);
  if (it == entries_.end()) return Status::not_found(fmt::format("no entry with id '{}'", detail::clip_for_message(entry.id)));
  const std::uint64_t version = it->second.entry.version + 1;
  return store(std::move(entry), version);
}

std::vector<float> KnowledgeBase::phrasing_vectors(const std::string& id) const {
  std::vector<float> out;
  const auto it = entries_.find(id);
  if (it == entries_.end()) return out;
  for (auto label : it->second.labels) {
    if (const float* v = index_.vector_of(label)) out.insert(out.end(), v, v + encoder_->dimension());
  }
  return out;
}

Result<bool> KnowledgeBase::store_if_newer(KnowledgeEntry entry) {
  const auto it = entries_.find(entry.id);
  if (it != entries_.end() && it->second.entry.version >= entry.version) return false;
  const std::uint64_t version = std::max<std::uint64_t>(entry.version, 1);
  Status s = store(std::move(entry), version);
  if (!s.is_ok()) return s;
  return true;
}

std::vector<std::string> KnowledgeBase::ids() const {
  std::vector<std::string> all;
  all.reserve(entries_.size());
  for (const auto& [id, stored] : entries_) all.push_back(id);
  return all;
}

Status KnowledgeBase::remove(const std::string& id) {
  const auto it = entries_.find(id);
  if (it == entries_.end()) return Status::not_found(fmt::format("no entry with id '{}'", detail::clip_for_message(id)));
  erase_labels(it->second);
  entries_.erase(it);
  return Status::ok();
}

Status KnowledgeBase::reindex() {
  std::vector<KnowledgeEntry> all;
  all.reserve(entries_.size());
  for (const auto& [id, se] : entries_) all.push_back(se.entry);
  // Keep ids in a stable order so labels do not depend on hash order.
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return replace_all(std::move(all));
}

const KnowledgeEntry* KnowledgeBase::find(const std::string& id) const {
  const auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second.entry;
}

std::vector<retrieval::RankedPhrasing> KnowledgeBase::ranked_phrasings(std::string_view normalized_question,
                                                                      const float* query, std::size_t breadth) const {
  if (ranker_ && !normalized_question.empty()) {
    return ranker_->rank(normalized_question, query, index_, std::numeric_limits<std::size_t>::max());
  }
  std::vector<retrieval::RankedPhrasing> ranked;
  for (const auto& n : index_.search(query, breadth)) {
    ranked.push_back({n.label, n.similarity, n.similarity, n.similarity >= kRepeatedPhrasingCosine});
  }
  return ranked;
}

std::vector<KnowledgeMatch> KnowledgeBase::entries_from(const std::vector<retrieval::RankedPhrasing>& ranked,
                                                        std::size_t top_k, const LabelFilter& skip) const {
  // An entry ranks by its best phrasing; its similarity is the best cosine
  // among its ranked phrasings, so min_answer_score means what it means
  // under kDense.
  std::vector<KnowledgeMatch> matches;
  std::unordered_map<const StoredEntry*, std::size_t> position;
  for (const auto& r : ranked) {
    if (skip && skip(r.label)) continue;
    const auto it = entry_of_label_.find(r.label);
    if (it == entry_of_label_.end()) continue;
    const auto known = position.find(it->second);
    if (known == position.end()) {
      if (matches.size() == top_k) continue;  // later phrasings may still raise a kept entry's similarity
      position.emplace(it->second, matches.size());
      KnowledgeMatch m{&it->second->entry, r.cosine, r.score};
      m.repeats_phrasing = r.repeated;
      matches.push_back(m);
    } else {
      matches[known->second].similarity = std::max(matches[known->second].similarity, r.cosine);
    }
  }
  return matches;
}

std::vector<KnowledgeMatch> KnowledgeBase::search(const float* query, std::size_t top_k) const {
  return search(std::string_view(), query, top_k);
}

std::vector<KnowledgeMatch> KnowledgeBase::search(std::string_view normalized_question, const float* query,
                                                  std::size_t top_k) const {
  if (top_k == 0 || entries_.empty()) return {};
  // Several phrasings of one entry can crowd the top: fetch more phrasings
  // than entries wanted.
  auto matches = entries_from(ranked_phrasings(normalized_question, query, std::max<std::size_t>(top_k * 4, 8)), top_k);
  if (!matches.empty()) {
    KnowledgeMatch& best = matches.front();
    best.confidence = calibration_.confidence({best.similarity, best.repeats_phrasing});
  }
  return matches;
}

void KnowledgeBase::calibrate() {
  calibration_ = retrieval::AnswerCalibration();
  std::vector<std::pair<const StoredEntry*, std::size_t>> phrasings;  // (entry, phrasing), in id order
  std::vector<const StoredEntry*> stored;
  for (const auto& [id, se] : entries_) stored.push_back(&se);
  std::sort(stored.begin(), stored.end(), [](const StoredEntry* a, const StoredEntry* b) { return a->entry.id < b->entry.id; });
  for (const StoredEntry* se : stored) {
    for (std::size_t j = 0; j < se->labels.size(); ++j) phrasings.emplace_back(se, j);
  }
  if (phrasings.empty()) return;
  // Evenly strided, so every part of the base is asked. Each phrasing is
  // asked with its whole entry left out: whatever comes first is a score
  // that answers nothing.
  const std::size_t probes = std::min(phrasings.size(), kCalibrationProbes);
  std::vector<float> unanswerable;
  for (std::size_t p = 0; p < probes; ++p) {
    const auto [se, j] = phrasings[p * phrasings.size() / probes];
    const auto texts = phrasings_of(se->entry);
    const float* vector = index_.vector_of(se->labels[j]);
    if (!vector || j >= texts.size()) continue;
    const auto& own = se->labels;
    const auto matches = entries_from(ranked_phrasings(lexical_text(*texts[j]), vector, kCalibrationBreadth), 1,
                                      [&own](std::int64_t l) { return std::find(own.begin(), own.end(), l) != own.end(); });
    // A phrasing another entry repeats word for word says nothing about
    // unanswerable questions.
    if (!matches.empty() && !matches.front().repeats_phrasing) unanswerable.push_back(matches.front().similarity);
  }
  calibration_ = retrieval::AnswerCalibration::fit(std::move(unanswerable));
}

bool KnowledgeBase::built_from_current_versions(const Answer& answer) const {
  return std::all_of(answer.matches.begin(), answer.matches.end(), [&](const EntryMatch& m) {
    const KnowledgeEntry* e = find(m.entry_id);
    return e != nullptr && e->version == m.version;
  });
}

Answer answer_from_matches(const std::vector<KnowledgeMatch>& matches, const AnswerRule& rule) {
  Answer answer;
  for (const auto& m : matches) answer.matches.push_back({m.entry->id, m.similarity, m.entry->version});
  answer.score = matches.empty() ? 0.0f : matches.front().similarity;
  answer.confidence = matches.empty() ? -1.0f : matches.front().confidence;
  if (matches.empty()) {
    answer.fallback_reason = "no entry matched";
  } else if (answer.score < rule.min_score) {
    answer.fallback_reason = fmt::format("the best entry's similarity {:.3f} is under min_answer_score {:.3f}",
                                         answer.score, rule.min_score);
  } else if (rule.min_confidence > 0 && answer.confidence >= 0 && answer.confidence < rule.min_confidence) {
    answer.fallback_reason = fmt::format("the best entry's confidence {:.3f} is under min_answer_confidence {:.3f}",
                                         answer.confidence, rule.min_confidence);
  }
  if (answer.fallback_reason.empty()) {
    answer.text = matches.front().entry->answer;
    answer.tier = AnswerTier::kKnowledge;
  } else {
    answer.text = rule.fallback_text;
    answer.tier = AnswerTier::kFallback;
  }
  return answer;
}

}  // namespace rapidqa::engine
