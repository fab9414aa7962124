#include "cache/snapshot_codec.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

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
  return a;
}

Status write_snapshot_file(const std::string& path, const std::vector<std::uint8_t>& payload) {
  std::string header(kMagic, sizeof kMagic);
  put<std::uint32_t>(header, kSnapshotVersion);
  put<std::uint64_t>(header, payload.size());
  put<std::uint64_t>(header, fnv1a(payload));
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
                  ::fsync(fd) == 0;
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

Result<std::vector<std::uint8_t>> read_snapshot_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found(fmt::format("snapshot '{}' cannot be opened", path));
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return Status::data_loss(fmt::format("{}: not a rapidqa semantic-cache snapshot (bad header)", path));
  }
  const auto version = get<std::uint32_t>(bytes.data() + 8);
  if (version != kSnapshotVersion) {
    return Status::failed_precondition(
        fmt::format("{}: snapshot format version {}, this library reads version {}", path, version, kSnapshotVersion));
  }
  const auto length = get<std::uint64_t>(bytes.data() + 12);
  const auto checksum = get<std::uint64_t>(bytes.data() + 20);
  if (bytes.size() - kHeaderBytes != length) {
    return Status::data_loss(fmt::format("{}: snapshot holds {} payload bytes, its header says {} (truncated?)", path,
                                         bytes.size() - kHeaderBytes, length));
  }
  std::vector<std::uint8_t> payload(bytes.begin() + kHeaderBytes, bytes.end());
  if (fnv1a(payload) != checksum) return Status::data_loss(fmt::format("{}: snapshot checksum mismatch (corrupt)", path));
  return payload;
}

}  // namespace rapidqa::cache
