// CacheKey: what the cache tiers file an answer under: the tenant (the
// namespace answers are never shared across) and the normalised question.
// A struct rather than one joined string, so nothing ever has to split a
// key again to learn whose question it was.
//
// Thread safety: a value type; thread-compatible.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>

namespace rapidqa {

struct CacheKey {
  std::string tenant;    // namespace; "" is the default one
  std::string question;  // as normalize_text returns it

  CacheKey() = default;
  CacheKey(std::string tenant_name, std::string normalized_question)
      : tenant(std::move(tenant_name)), question(std::move(normalized_question)) {}
  // A key in the default namespace, from the question alone (what a
  // ResultCache used on its own is usually keyed by).
  CacheKey(std::string normalized_question) : question(std::move(normalized_question)) {}  // NOLINT: implicit by design
  CacheKey(const char* normalized_question) : question(normalized_question) {}             // NOLINT: implicit by design

  friend bool operator==(const CacheKey& a, const CacheKey& b) {
    return a.question == b.question && a.tenant == b.tenant;
  }
  friend bool operator!=(const CacheKey& a, const CacheKey& b) { return !(a == b); }
};

}  // namespace rapidqa

namespace std {
template <>
struct hash<rapidqa::CacheKey> {
  std::size_t operator()(const rapidqa::CacheKey& key) const noexcept {
    const std::size_t question = std::hash<std::string>{}(key.question);
    if (key.tenant.empty()) return question;
    // boost::hash_combine's mix: tenants with equal questions land apart.
    return question ^ (std::hash<std::string>{}(key.tenant) + 0x9e3779b97f4a7c15ULL + (question << 6) + (question >> 2));
  }
};
}  // namespace std
