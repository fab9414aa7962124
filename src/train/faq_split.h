// FaqSplit: the phrasings of a knowledge base divided into the ones a model
// trains on and the ones held back to measure it, and top1_accuracy(), the
// retrieval measure every model built from the FAQ is compared by (the
// trained FP32 model, its quantized and pruned versions, through LibTorch or
// through our runtime): the training phrasings are the index, each held-back
// phrasing is a query, and a query counts when its nearest index phrasing
// (cosine) belongs to its own entry.
//
// Free of LibTorch, so benchmarks can use it with any encoder.
//
// Thread safety: value types and free functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rapidqa/knowledge_entry.h"
#include "rapidqa/status.h"

namespace rapidqa::train {

struct Phrasing {
  std::string text;
  std::size_t entry = 0;  // index into FaqSplit::entry_ids
};

struct FaqSplit {
  std::vector<std::string> entry_ids;  // KnowledgeEntry::id of each entry, in file order
  std::vector<Phrasing> training;      // what a model may learn from; also the retrieval index
  std::vector<Phrasing> held_back;     // never trained on; the retrieval queries
  // Other text of an entry a model may learn from (its answer), but which
  // is neither indexed nor asked: retrieval is measured over phrasings only.
  std::vector<Phrasing> companions;
};

struct FaqSplitOptions {
  // Picks which alternate each entry gives up; the same seed always holds
  // back the same phrasings, whatever the order of the entries.
  std::uint64_t seed = 0;
  // An entry holds one alternate back only when it has at least this many
  // distinct phrasings (question included). With 2, every entry that has an
  // alternate is measured, and one of just two phrasings keeps only its
  // question (it then trains as a negative only); 3 keeps a positive pair
  // in training for every entry instead.
  std::size_t min_phrasings_to_hold_back = 2;
  // Each entry's answer becomes a companion. Answers say in other words
  // what the phrasings ask, so pairing them teaches the many words that
  // only the held-back phrasings and the answers share.
  bool answers_as_companions = true;
};

// The canonical question always stays in training (it is what the engine
// indexes first). Phrasings that repeat within an entry count once.
// kInvalidArgument when entries is empty, an id repeats, or a phrasing is
// shared by two entries (naming both: a query could never tell them apart).
Result<FaqSplit> split_faq(const std::vector<KnowledgeEntry>& entries, const FaqSplitOptions& options = {});

// The split seed a model directory was trained with (the "seed" of the
// training_summary.json rapidqa-train writes), or `fallback` without one:
// measuring a model on phrasings it trained on would overstate it.
std::uint64_t training_split_seed(const std::string& model_dir, std::uint64_t fallback);

// Encodes texts into out as texts.size() rows of equal width, row-major (the
// shape of Encoder::encode). Vectors need not be normalised.
using EncodeFn = std::function<Status(const std::vector<std::string>& texts, std::vector<float>& out)>;

struct RetrievalAccuracy {
  std::size_t queries = 0;  // held-back phrasings asked
  std::size_t correct = 0;  // whose nearest training phrasing is of the same entry
  double top1() const { return queries == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(queries); }
};

// Encodes the split's training phrasings and held-back phrasings with
// encode and scores retrieval by cosine similarity (ties go to the earlier
// index phrasing). Returns encode's error as it is; kInvalidArgument when it
// returns a size that is not texts.size() rows of one width, or when the
// split has no training or no held-back phrasing.
Result<RetrievalAccuracy> top1_accuracy(const EncodeFn& encode, const FaqSplit& split);

}  // namespace rapidqa::train
