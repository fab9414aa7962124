// KnowledgeChange and ChangeBus: the one path by which a knowledge update
// reaches every cache tier. QAEngine publishes "entry X changed (version
// v)" after updating its knowledge; each tier subscribes and drops what was
// built from X; the Redis relay subscribes too and carries the same event to
// the other instances, whose engines apply it and publish it on their own
// bus. What the subscribers did (answers dropped, questions worth
// re-answering) comes back from publish() as a ChangeEffect, so the
// publisher never has to fish it out of shared state.
//
// Thread safety: thread-safe. publish() runs every subscriber on the
// calling thread before it returns, so a change has reached every tier when
// the call that made it returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <functional>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "rapidqa/cache_key.h"
#include "rapidqa/knowledge_entry.h"

namespace rapidqa::cache {

struct KnowledgeChange {
  enum class Kind {
    kUpsert,      // entry added or updated; `entry` holds it as stored
    kRemove,      // entry removed
    kInvalidate,  // entry unchanged, but every cached answer built from it must go
    kReload,      // the whole knowledge base was replaced: every cached answer must go
  };
  Kind kind = Kind::kInvalidate;
  std::string entry_id;                 // "" for kReload
  std::uint64_t version = 0;            // the entry's version after the change (0 for kRemove, kReload)
  std::optional<KnowledgeEntry> entry;  // kUpsert only
  std::string origin;                   // the instance that made the change
};

// What one change did to a subscriber's answers; publish() adds up every
// subscriber's.
struct ChangeEffect {
  std::size_t removed = 0;             // cached answers dropped
  std::vector<CacheKey> hot_questions; // dropped answers hit often enough to re-answer ahead of time

  ChangeEffect& operator+=(ChangeEffect other) {
    removed += other.removed;
    hot_questions.insert(hot_questions.end(), std::make_move_iterator(other.hot_questions.begin()),
                         std::make_move_iterator(other.hot_questions.end()));
    return *this;
  }
};

class ChangeBus {
 public:
  // A subscriber that keeps no answers (the Redis relay) returns {}.
  using Subscriber = std::function<ChangeEffect(const KnowledgeChange&)>;

  // Subscribers are added while the owner is being set up; they live as
  // long as the bus.
  void subscribe(Subscriber subscriber) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    subscribers_.push_back(std::move(subscriber));
  }

  ChangeEffect publish(const KnowledgeChange& change) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    ChangeEffect effect;
    for (const auto& subscriber : subscribers_) effect += subscriber(change);
    return effect;
  }

 private:
  mutable std::shared_mutex mu_;
  std::vector<Subscriber> subscribers_;  // guarded by mu_
};

}  // namespace rapidqa::cache
