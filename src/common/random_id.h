// A random 64-bit identifier as 16 hex digits: names an engine instance on
// the change bus and in Redis, and the Redis relay's epoch token. Unique
// enough that two processes (or two engines in one) never draw the same
// one; not a secret.
//
// Thread safety: thread-safe (each call seeds its own generator).
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include <fmt/format.h>

namespace rapidqa::detail {

inline std::string random_hex_id() {
  // random_device alone may be slow or, on some platforms, deterministic
  // per process: it only seeds a generator with 64 bits from two draws.
  std::random_device device;
  std::mt19937_64 generator((static_cast<std::uint64_t>(device()) << 32) ^ device());
  return fmt::format("{:016x}", generator());
}

}  // namespace rapidqa::detail
