#include "cache/snapshot_codec.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

namespace rapidqa::cache {
namespace {

constexpr char kMagic[8] = {'R', 'Q', 'A', 'S', 'N', 'A', 'P', '1'};
constexpr std::size_t kHeaderBytes = 8 + 4 + 8 + 8;

std::uint64_t fnv1a(const std::vector<std::uint8_t>& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ULL;
  }
  return h;
}

template <typename T>
void put(std::string& out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

template <typename T>
T get(const char* in) {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) value |= static_cast<T>(static_cast<unsigned char>(in[i])) << (8 * i);
  return value;
}

}  // namespace

nlohmann::json answer_to_json(const Answer& a) {
  nlohmann::json matches = nlohmann::json::array();
  for (const auto& m : a.matches) matches.push_back({{"id", m.entry_id}, {"score", m.score}, {"version", m.version}});
  nlohmann::json j = {{"text", a.text}, {"score", a.score}, {"matches", matches}, {"tier", static_cast<int>(a.tier)}};
  if (a.extracted) {
    j["extracted"] = {{"id", a.extracted->entry_id}, {"begin", a.extracted->begin}, {"end", a.extracted->end},
                      {"score", a.extracted->score}, {"probability", a.extracted->probability}};
  }
  if (a.generated) j["generated"] = true;
  if (a.confidence >= 0) j["confidence"] = a.confidence;
  return j;
}

Answer answer_from_json(const nlohmann::json& j) {
  Answer a;
  a.text = j.at("text").get<std::string>();
  a.score = j.at("score").get<float>();
  for (const auto& m : j.at("matches")) {
    a.matches.push_back({m.at("id").get<std::string>(), m.at("score").get<float>(), m.at("version").get<std::uint64_t>()});
  }
  a.tier = static_cast<AnswerTier>(j.at("tier").get<int>());
  if (j.contains("extracted")) {
    const auto& e = j.at("extracted");
    a.extracted = ExtractedSpan{e.at("id").get<std::string>(), e.at("begin").get<std::size_t>(),
                                e.at("end").get<std::size_t>(), e.at("score").get<float>(),
                                e.at("probability").get<float>()};
  }
  if (j.contains("generated")) a.generated = j.at("generated").get<bool>();
  // Older snapshots have none: unknown.
  if (j.contains("confidence")) a.confidence = j.at("confidence").get<float>();
  return a;
}

std::string cached_answer_problem(const Answer& a) {
  const int tier = static_cast<int>(a.tier);
  if (tier < static_cast<int>(AnswerTier::kResultCache) || tier > static_cast<int>(AnswerTier::kKnowledgeCache)) {
    return fmt::format("unknown answer tier {}", tier);
  }
  if (a.tier == AnswerTier::kFallback) return "a fallback answer (fallbacks are never cached)";
  if (!std::isfinite(a.score)) return fmt::format("answer score {} is not finite", a.score);
  if (a.matches.empty()) return "answer has no matches (no entry it was built from)";
  if (!(a.confidence == -1.0f || (a.confidence >= 0.0f && a.confidence <= 1.0f))) {
    return fmt::format("answer confidence {} is neither -1 nor in [0, 1]", a.confidence);
  }
  for (std::size_t i = 0; i < a.matches.size(); ++i) {
    const EntryMatch& m = a.matches[i];
    if (m.entry_id.empty()) return fmt::format("match {} has an empty entry id", i);
    if (m.entry_id.size() > 256) return fmt::format("match {} has an entry id of {} bytes", i, m.entry_id.size());
    if (!std::isfinite(m.score)) return fmt::format("match {} has score {}", i, m.score);
  }
  if (a.extracted) {
    const ExtractedSpan& e = *a.extracted;
    if (e.entry_id.empty()) return "extracted span has an empty entry id";
    if (e.begin > e.end) return fmt::format("extracted span begins at {} after its end {}", e.begin, e.end);
    if (!std::isfinite(e.score) || !std::isfinite(e.probability)) return "extracted span has a non-finite score";
  }
  return "";
}

std::string cached_vector_problem(const float* vector, std::size_t dimension) {
  double squared = 0;
  for (std::size_t i = 0; i < dimension; ++i) {
    if (!std::isfinite(vector[i])) return fmt::format("vector component {} is {}", i, vector[i]);
    squared += static_cast<double>(vector[i]) * vector[i];
  }
  const double norm = std::sqrt(squared);
  if (std::fabs(norm - 1.0) > 1e-3) return fmt::format("vector has length {:.6g}, not 1", norm);
  return "";
}

namespace {

// HMAC-SHA256 under key of the given pieces in order (header, payload),
// fed incrementally so the payload is never copied for it.
std::array<std::uint8_t, kSnapshotMacBytes> snapshot_mac(
    const std::string& key, std::initializer_list<std::pair<const std::uint8_t*, std::size_t>> pieces) {
  std::unique_ptr<EVP_MAC, decltype(&EVP_MAC_free)> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr), &EVP_MAC_free);
  if (!mac) throw std::runtime_error("HMAC is not available from libcrypto");
  std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> context(EVP_MAC_CTX_new(mac.get()), &EVP_MAC_CTX_free);
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0), OSSL_PARAM_construct_end()};
  bool ok = context && EVP_MAC_init(context.get(), reinterpret_cast<const unsigned char*>(key.data()), key.size(),
                                    params) == 1;
  for (const auto& [data, size] : pieces) ok = ok && EVP_MAC_update(context.get(), data, size) == 1;
  std::array<std::uint8_t, kSnapshotMacBytes> out{};
  std::size_t length = 0;
  ok = ok && EVP_MAC_final(context.get(), out.data(), &length, out.size()) == 1 && length == out.size();
  if (!ok) throw std::runtime_error("HMAC-SHA256 failed");
  return out;
}

}  // namespace

Status write_snapshot_file(const std::string& path, const std::vector<std::uint8_t>& payload,
                           const std::string& key) {
  std::string header(kMagic, sizeof kMagic);
  put<std::uint32_t>(header, key.empty() ? kSnapshotVersion : kKeyedSnapshotVersion);
  put<std::uint64_t>(header, payload.size());
  put<std::uint64_t>(header, fnv1a(payload));
  std::array<std::uint8_t, kSnapshotMacBytes> mac{};
  if (!key.empty()) {
    mac = snapshot_mac(key, {{reinterpret_cast<const std::uint8_t*>(header.data()), header.size()},
                             {payload.data(), payload.size()}});
  }
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::io_error(fmt::format("{}: cannot create: {}", temporary, std::strerror(errno)));
  auto write_all = [&](const void* data, std::size_t size) {
    const auto* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      p += n;
      size -= static_cast<std::size_t>(n);
    }
    return true;
  };
  const bool ok = write_all(header.data(), header.size()) && write_all(payload.data(), payload.size()) &&
                  (key.empty() || write_all(mac.data(), mac.size())) && ::fsync(fd) == 0;
  const int saved_errno = errno;
  ::close(fd);
  if (!ok) {
    std::remove(temporary.c_str());
    return Status::io_error(fmt::format("{}: write failed: {}", temporary, std::strerror(saved_errno)));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return Status::io_error(fmt::format("{}: cannot rename into place: {}", path, std::strerror(errno)));
  }
  return Status::ok();
}

Result<std::vector<std::uint8_t>> read_snapshot_file(const std::string& path, std::uint64_t max_bytes,
                                                     const std::string& key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found(fmt::format("snapshot '{}' cannot be opened", path));
  if (max_bytes > 0) {
    std::error_code error;
    const auto size = std::filesystem::file_size(path, error);
    if (error) return Status::io_error(fmt::format("{}: cannot tell its size: {}", path, error.message()));
    if (size > max_bytes) {
      return Status::out_of_range(fmt::format("{}: snapshot of {} bytes is larger than this cache can hold ({} bytes)",
                                              path, size, max_bytes));
    }
  }
  // Read once into the buffer that becomes the payload: a snapshot may be
  // hundreds of megabytes, and every copy of it costs that again.
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return Status::data_loss(fmt::format("{}: not a rapidqa semantic-cache snapshot (bad header)", path));
  }
  const char* header = reinterpret_cast<const char*>(bytes.data());
  const auto version = get<std::uint32_t>(header + 8);
  if (version != kSnapshotVersion && version != kKeyedSnapshotVersion) {
    return Status::failed_precondition(fmt::format("{}: snapshot format version {}, this library reads versions {} and {}",
                                                   path, version, kSnapshotVersion, kKeyedSnapshotVersion));
  }
  const bool keyed = version == kKeyedSnapshotVersion;
  if (!key.empty() && !keyed) {
    return Status::failed_precondition(
        fmt::format("{}: snapshot is not authenticated, and this cache only loads snapshots written with its key", path));
  }
  const std::size_t trailer = keyed ? kSnapshotMacBytes : 0;
  const auto length = get<std::uint64_t>(header + 12);
  const auto checksum = get<std::uint64_t>(header + 20);
  if (bytes.size() < kHeaderBytes + trailer || bytes.size() - kHeaderBytes - trailer != length) {
    return Status::data_loss(fmt::format("{}: snapshot holds {} bytes after its header, its header says {}{} (truncated?)",
                                         path, bytes.size() - kHeaderBytes, length, keyed ? " and a MAC" : ""));
  }
  if (!key.empty()) {
    const auto mac = snapshot_mac(key, {{bytes.data(), kHeaderBytes + length}});
    if (CRYPTO_memcmp(mac.data(), bytes.data() + kHeaderBytes + length, mac.size()) != 0) {
      return Status::data_loss(fmt::format("{}: snapshot MAC does not match this cache's key (tampered, or another key)", path));
    }
  }
  bytes.resize(kHeaderBytes + length);
  bytes.erase(bytes.begin(), bytes.begin() + kHeaderBytes);
  if (fnv1a(bytes) != checksum) return Status::data_loss(fmt::format("{}: snapshot checksum mismatch (corrupt)", path));
  return bytes;
}

}  // namespace rapidqa::cache
