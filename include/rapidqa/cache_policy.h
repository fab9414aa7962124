// How a cache tier expires and evicts what it holds; shared by the result,
// semantic and knowledge tiers (each has its own options struct).
//
// Thread safety: value types.
#pragma once

namespace rapidqa {

// What goes first when a tier is full (by entry count or by bytes).
enum class EvictionPolicy {
  kLeastRecentlyUsed,    // the answer hit longest ago
  kLeastFrequentlyUsed,  // the answer hit least often (counts halve as the tier turns over, so old
                         // popularity fades), ties broken by recency
};

// When a cached answer expires.
enum class ExpiryMode {
  kAbsolute,  // its TTL after it was cached, however often it is hit
  kSliding,   // its TTL after its last hit: hot answers stay, idle ones go
};

}  // namespace rapidqa
