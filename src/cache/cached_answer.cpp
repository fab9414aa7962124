#include "cache/cached_answer.h"

#include <mutex>
#include <string_view>
#include <unordered_map>

namespace rapidqa::cache {

// Held by the pool and by every interned string's deleter, so a string that
// outlives the pool object still finds the map to leave.
struct SharedTextPool::State {
  struct Held {
    const std::string* text;  // identifies which string the view belongs to
    std::weak_ptr<const std::string> weak;
  };
  mutable std::mutex mu;
  std::unordered_map<std::string_view, Held> texts;  // guarded by mu; keys view the held strings

  void forget(const std::string* text) {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = texts.find(std::string_view(*text));
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
  std::lock_guard<std::mutex> lock(state_->mu);
  if (const auto it = state_->texts.find(std::string_view(text)); it != state_->texts.end()) {
    if (auto held = it->second.weak.lock()) return held;
    // Its last holder is letting go (the deleter waits for the lock): the
    // key views that dying string, so the entry goes before a new one.
    state_->texts.erase(it);
  }
  auto owned = std::make_unique<const std::string>(std::move(text));
  const std::string* raw = owned.get();
  std::weak_ptr<State> state = state_;
  std::shared_ptr<const std::string> shared(owned.release(), [state](const std::string* s) {
    if (auto alive = state.lock()) alive->forget(s);
    delete s;
  });
  state_->texts.emplace(std::string_view(*raw), State::Held{raw, shared});
  return shared;
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
                      a.near_miss_reason.capacity() + a.matches.capacity() * sizeof(EntryMatch);
  for (const auto& m : a.matches) bytes += m.entry_id.capacity();
  if (a.extracted) bytes += a.extracted->entry_id.capacity();
  return bytes;
}

}  // namespace rapidqa::cache
