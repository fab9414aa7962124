// CachedAnswer: an Answer as a cache tier holds it. A knowledge answer is
// cached under every phrasing users ask it by, in up to three tiers; with a
// long answer (a 1 MB policy text asked 2,000 ways) copies of the text
// would take gigabytes. Tiers therefore keep the text in one shared,
// immutable string per distinct text (SharedTextPool), and each cached
// answer holds a reference to it.
//
// Thread safety: CachedAnswer is an immutable value once built;
// SharedTextPool is thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "rapidqa/answer.h"

namespace rapidqa::cache {

// Deduplicates texts while anyone holds them: intern() of an equal text
// returns the string already held. A text is freed (and forgotten) when its
// last holder lets go.
class SharedTextPool {
 public:
  // The process-wide pool every tier of every engine shares, so the same
  // answer cached by the result, knowledge and semantic tiers is one string.
  static SharedTextPool& instance();

  std::shared_ptr<const std::string> intern(std::string text);
  std::size_t size() const;  // distinct texts held now

  struct State;

 private:
  SharedTextPool();
  std::shared_ptr<State> state_;
};

class CachedAnswer {
 public:
  CachedAnswer() = default;
  explicit CachedAnswer(Answer answer);

  // A copy for the caller, text included.
  Answer answer() const;
  // Everything but the text (provenance checks read these).
  const Answer& metadata() const { return metadata_; }
  const std::string& text() const { return text_ ? *text_ : empty_text(); }

  // What the item costs a tier's byte bound. The shared text is counted in
  // full for every item, so the bound holds however the sharing turns out
  // (it over-counts when many items share one text).
  std::size_t bytes() const;

 private:
  static const std::string& empty_text();
  Answer metadata_;  // text left empty
  std::shared_ptr<const std::string> text_;
};

}  // namespace rapidqa::cache
