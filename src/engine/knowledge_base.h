// KnowledgeBase: the entries the engine answers from, and a vector index
// over every phrasing (question and alternates) of every entry.
//
// Thread safety: thread-compatible; QAEngine holds a reader/writer lock
// around it (search() is const and may run concurrently).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "index/vector_index.h"
#include "retrieval/answer_calibration.h"
#include "retrieval/hybrid_ranker.h"
#include "rapidqa/answer.h"
#include "rapidqa/encoder.h"
#include "rapidqa/knowledge_store.h"
#include "rapidqa/knowledge_entry.h"
#include "rapidqa/status.h"
#include "rapidqa/text_normalizer.h"

namespace rapidqa::engine {

struct KnowledgeBaseOptions {
  std::size_t exact_limit = 2048;
  int search_breadth = 128;
  NormalizeOptions normalize;
  // kDense keeps the vector index alone; the others rank with a
  // retrieval::HybridRanker over a BM25 index kept beside it.
  RetrievalOptions retrieval;
  std::shared_ptr<const retrieval::WordDictionary> words;  // retrieval.word_dictionary, loaded (may be null)
};

struct KnowledgeMatch {
  const KnowledgeEntry* entry;  // valid while the base is not modified
  float similarity;             // the best cosine among the entry's ranked phrasings
  float rank_score = 0;         // the ranker's score (the cosine under kDense)
  bool repeats_phrasing = false;  // the question is one of its phrasings, word for word
  // The calibrated confidence that this entry answers the question
  // (retrieval::AnswerCalibration); set on the best match only, -1 on the
  // rest and when the base could not be calibrated.
  float confidence = -1;
};

class KnowledgeBase {
 public:
  KnowledgeBase(std::shared_ptr<Encoder> encoder, KnowledgeBaseOptions options);

  // Called while many entries are encoded: (entries done, entries to do).
  using EncodeProgress = std::function<void(std::size_t done, std::size_t total)>;
  // Entry id -> vectors of one of its versions, kept from an earlier run.
  using KnownVectors = std::unordered_map<std::string, const StoredVectors*>;

  // Replaces everything; on error nothing changes. Refits the encoder.
  Status replace_all(std::vector<KnowledgeEntry> entries, const EncodeProgress& progress = nullptr);
  // Replaces everything without refitting the encoder, taking an entry's
  // vectors from `known` when they belong to its exact version (and have
  // one row per phrasing) and encoding the rest, a thousand entries at a
  // time with progress after each. On error nothing changes. Returns the
  // ids of the entries that were encoded.
  Result<std::vector<std::string>> replace_all_reusing(std::vector<KnowledgeEntry> entries, const KnownVectors& known,
                                          const EncodeProgress& progress = nullptr);
  Status add(KnowledgeEntry entry);
  Status update(KnowledgeEntry entry);
  Status remove(const std::string& id);
  // Stores a change made on another instance, keeping its version: applied
  // (true) when the entry is new here or the change is newer than the local
  // copy; an equal or older version is left alone (false).
  Result<bool> store_if_newer(KnowledgeEntry entry);
  // Stores an entry under a version its store assigned, replacing any
  // entry with its id; on error nothing changes.
  Status put(KnowledgeEntry entry, std::uint64_t version) { return store(std::move(entry), version); }
  // Whether every phrasing of the entry would encode (what add, update and
  // put refuse), checked before a change is committed to a store so the
  // commit is not followed by a refusal here.
  Status check_phrasings(const KnowledgeEntry& entry) const;
  // Refits the encoder on the current phrasings and re-encodes them.
  Status reindex();

  // Saves the retrieval index to `path` and, to `path`.labels, which labels
  // hold which entry version's phrasings, the encoder's fingerprint, and
  // the index file's size and checksum (so a labels file never pairs with
  // another save's index). Each file is written whole or not at all.
  Status save_snapshot(const std::string& path, const std::string& fingerprint) const;
  // Replaces everything from a snapshot instead of building the index:
  // entries whose version the snapshot holds keep their vectors there, the
  // rest are encoded and added, and entries it holds that `entries` lacks
  // (or holds at another version) are dropped from it. On error nothing
  // changes: kNotFound without a snapshot; kFailedPrecondition when another
  // encoder or other index options made it; kDataLoss when it is damaged or
  // its two files do not belong together. The entries are moved from on
  // success only.
  struct SnapshotRestore {
    std::vector<std::string> encoded_ids;  // the entries encoded (new or changed since the save)
    bool outdated_format = false;          // read from an older format: save it again
  };
  // `index`, when given, is what load_snapshot_index(path) returned (read
  // on another thread meanwhile); otherwise the index is read here.
  Result<SnapshotRestore> restore_snapshot(const std::string& path, const std::string& fingerprint,
                                           std::vector<KnowledgeEntry>& entries,
                                           Result<index::VectorIndex>* index = nullptr);
  // The index half of restore_snapshot, which needs neither the entries nor
  // the encoder: a restart reads it while it reads the store's entries.
  // Reads nothing but the file and this base's index options.
  Result<index::VectorIndex> load_snapshot_index(const std::string& path) const;

  const KnowledgeEntry* find(const std::string& id) const;
  // Whether every entry the answer was built from is still here at the
  // version it was built from: the one test a cached answer passes before
  // it is served or restored.
  bool built_from_current_versions(const Answer& answer) const;
  // The indexed vectors of an entry's phrasings, row after row (empty when
  // the id is unknown).
  std::vector<float> phrasing_vectors(const std::string& id) const;
  std::size_t size() const { return entries_.size(); }
  // Every entry's id, in no particular order.
  std::vector<std::string> ids() const;
  std::size_t phrasing_count() const { return index_.size(); }

  // The best entries for a query vector, at most top_k, best first; each
  // entry scores its best phrasing.
  std::vector<KnowledgeMatch> search(const float* query, std::size_t top_k) const;
  // The same with the question's normalised text: ranked by the hybrid
  // ranker unless retrieval.fusion is kDense.
  std::vector<KnowledgeMatch> search(std::string_view normalized_question, const float* query,
                                     std::size_t top_k) const;
  // The calibration search() scores confidences with.
  const retrieval::AnswerCalibration& calibration() const { return calibration_; }
  // What the last fit of the hybrid ranker learned from (all zero without one).
  retrieval::RankerFit ranker_fit() const { return ranker_fit_; }
  // How search ranks and whether its confidence is calibrated, in words
  // (what KnowledgeLoadReport::ranking says).
  std::string ranking_summary() const;

 private:
  struct StoredEntry {
    KnowledgeEntry entry;
    std::vector<std::int64_t> labels;  // one per phrasing in the index
  };
  struct Encoded {
    std::vector<std::string> normalized;  // every phrasing, as the encoder reads it
    std::vector<float> vectors;
  };

  // Encodes every phrasing of the entries, in order; with refit_encoder the
  // encoder first learns its corpus statistics from them.
  Status encode_phrasings(const std::vector<const KnowledgeEntry*>& entries, Encoded& out,
                          std::vector<std::size_t>* phrasing_counts, bool refit_encoder) const;
  // The text the encoder gets for a phrasing (normalised or as written).
  Result<std::string> encoder_input(const std::string& phrasing) const;
  // Encodes and indexes an entry under the given version, replacing any
  // entry with its id; on error nothing changes.
  Status store(KnowledgeEntry entry, std::uint64_t version);
  void erase_labels(StoredEntry& stored);
  // The BM25 index rebuilt from every stored phrasing and the ranker
  // refitted: after anything that replaces the whole base.
  void rebuild_ranker();
  // The ranker rebuilt (when there is one), then the calibration refitted.
  void rebuild_ranking();
  // Fits calibration_ from the base's own phrasings (AnswerCalibration).
  void calibrate();
  std::string ranker_summary() const;
  // Every candidate phrasing for a question, best first: the ranker's, or
  // the vector index's `breadth` nearest when there is no ranker or no text.
  std::vector<retrieval::RankedPhrasing> ranked_phrasings(std::string_view normalized_question, const float* query,
                                                          std::size_t breadth) const;
  // The ranked phrasings' entries, best first, at most top_k, leaving out
  // the phrasings `skip` names.
  using LabelFilter = std::function<bool(std::int64_t)>;
  std::vector<KnowledgeMatch> entries_from(const std::vector<retrieval::RankedPhrasing>& ranked, std::size_t top_k,
                                           const LabelFilter& skip = nullptr) const;
  // A phrasing as the BM25 index reads it (it was validated when stored).
  std::string lexical_text(const std::string& phrasing) const;

  std::shared_ptr<Encoder> encoder_;
  KnowledgeBaseOptions options_;
  index::VectorIndex index_;
  std::unordered_map<std::string, StoredEntry> entries_;
  // Each indexed phrasing's entry: a node of entries_ (whose addresses
  // outlive rehashing and moving the map), so a search resolves a label
  // without a second lookup and a restart copies no id per phrasing.
  std::unordered_map<std::int64_t, const StoredEntry*> entry_of_label_;
  std::int64_t next_label_ = 0;
  std::unique_ptr<retrieval::HybridRanker> ranker_;  // null under kDense
  retrieval::RankerFit ranker_fit_;
  retrieval::AnswerCalibration calibration_;
};

// When retrieval's best entry answers.
struct AnswerRule {
  float min_score = 0;       // its cosine at least this
  float min_confidence = 0;  // its calibrated confidence at least this (0: any; an uncalibrated one passes)
  std::string fallback_text;
};

// The answer retrieval gives: the best entry's when it passes the rule,
// else the fallback text (tier kFallback) with the reason; every match is
// reported with its version.
Answer answer_from_matches(const std::vector<KnowledgeMatch>& matches, const AnswerRule& rule);

}  // namespace rapidqa::engine
