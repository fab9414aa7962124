#include "cache/cached_answer.h"

#include <functional>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace rapidqa::cache {
namespace {

// A view of a pooled text with its hash, computed once outside the lock.
struct TextKey {
  std::string_view text;
  std::size_t hash;
  bool operator==(const TextKey& other) const { return hash == other.hash && text == other.text; }
};
struct TextKeyHash {
  std::size_t operator()(const TextKey& key) const { return key.hash; }
};

}  // namespace

// Held by the pool and by every interned string's deleter, so a string that
// outlives the pool object still finds the map to leave.
struct SharedTextPool::State {
  struct Held {
    const std::string* text;  // identifies which string the key views
    std::weak_ptr<const std::string> weak;
  };
  mutable std::mutex mu;
  std::unordered_map<TextKey, Held, TextKeyHash> texts;  // guarded by mu; keys view the held strings

  void forget(const std::string* text, std::size_t hash) {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = texts.find(TextKey{*text, hash});
    // An equal text interned after this one's last holder let go replaced
    // the entry already: leave that one alone.
    if (it != texts.end() && it->second.text == text) texts.erase(it);
  }
};

SharedTextPool::SharedTextPool() : state_(std::make_shared<State>()) {}

SharedTextPool& SharedTextPool::instance() {
  static SharedTextPool* pool = new SharedTextPool();  // never destroyed: tiers may outlive static destruction
  return *pool;
}

std::shared_ptr<const std::string> SharedTextPool::intern(std::string text) {
  // Everything that may allocate (and so throw) happens before the lock:
  // a candidate dropped while the lock is held would run its deleter,
  // which takes the lock again.
  const std::size_t hash = std::hash<std::string_view>{}(text);
  auto owned = std::make_unique<const std::string>(std::move(text));
  const std::string* raw = owned.get();
  std::weak_ptr<State> state = state_;
  std::shared_ptr<const std::string> candidate(owned.release(), [state, hash](const std::string* s) {
    if (auto alive = state.lock()) alive->forget(s, hash);
    delete s;
  });
  std::shared_ptr<const std::string> held;  // released after the lock, like candidate
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    const TextKey key{*raw, hash};
    if (const auto it = state_->texts.find(key); it != state_->texts.end()) {
      held = it->second.weak.lock();
      // Its last holder is letting go (the deleter waits for the lock): the
      // key views that dying string, so the entry goes before a new one.
      if (!held) state_->texts.erase(it);
    }
    if (!held) {
      try {
        state_->texts.emplace(key, State::Held{raw, candidate});
      } catch (...) {
        return candidate;  // out of memory for the map: this text goes unshared
      }
    }
  }
  return held ? held : candidate;
}

std::size_t SharedTextPool::size() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->texts.size();
}

CachedAnswer::CachedAnswer(Answer answer) {
  text_ = SharedTextPool::instance().intern(std::move(answer.text));
  answer.text.clear();
  answer.text.shrink_to_fit();
  metadata_ = std::move(answer);
}

Answer CachedAnswer::answer() const {
  Answer a = metadata_;
  a.text = text();
  return a;
}

const std::string& CachedAnswer::empty_text() {
  static const std::string empty;
  return empty;
}

std::size_t CachedAnswer::bytes() const {
  const Answer& a = metadata_;
  std::size_t bytes = sizeof(CachedAnswer) + text().capacity() + a.degraded_reason.capacity() +
                      a.near_miss_reason.capacity() + a.fallback_reason.capacity() + a.cache_decision.capacity() + a.matches.capacity() * sizeof(EntryMatch);
  for (const auto& m : a.matches) bytes += m.entry_id.capacity();
  if (a.extracted) bytes += a.extracted->entry_id.capacity();
  return bytes;
}

}  // namespace rapidqa::cache
