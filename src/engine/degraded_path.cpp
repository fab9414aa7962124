#include "engine/degraded_path.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "common/atomic_file.h"
#include "common/checksum.h"
#include "common/mapped_file.h"

namespace rapidqa::engine {

DegradedPath::DegradedPath(DegradedPathOptions options) : options_(std::move(options)) {
  if (!options_.clock) options_.clock = steady_clock_instance();
  if (options_.lexical_index) {
    // The engine validated these options, so create() does not refuse them;
    // if it ever did, the degraded path would answer without a lexical index.
    auto hashing = HashingEncoder::create(options_.hashing);
    if (hashing) {
      lexical_encoder_ = std::move(hashing).value();
      lexical_ = std::make_unique<KnowledgeBase>(lexical_encoder_, options_.knowledge);
    } else {
      warn("no lexical index for degraded answers: " + hashing.status().message());
    }
  }
}

void DegradedPath::warn(const std::string& message) const {
  if (options_.log) options_.log(LogLevel::kWarning, message);
}

void DegradedPath::mirror_all(std::vector<KnowledgeEntry> entries) {
  if (!lexical_) return;
  Status s = lexical_->replace_all(std::move(entries));
  if (!s.is_ok()) warn("lexical index: " + s.message());
}

namespace {

// PATH.state: "RQLXS1\0\0", u64 n, n bytes of learned state, u64 XXH64 of
// everything before it.
constexpr std::size_t kStateMagicBytes = 8;
constexpr char kStateMagic[kStateMagicBytes] = {'R', 'Q', 'L', 'X', 'S', '1', 0, 0};

}  // namespace

Status DegradedPath::save_mirror(const std::string& path) const {
  if (!lexical_) return Status::ok();
  if (Status s = lexical_->save_snapshot(path, lexical_encoder_->fingerprint()); !s.is_ok()) return s;
  const std::string state = lexical_encoder_->learned_state();
  std::string file(kStateMagic, kStateMagicBytes);
  const std::uint64_t length = state.size();
  file.append(reinterpret_cast<const char*>(&length), sizeof length);
  file += state;
  const std::uint64_t checksum = detail::xxh64(file.data(), file.size());
  file.append(reinterpret_cast<const char*>(&checksum), sizeof checksum);
  auto writer = detail::AtomicFileWriter::create(path + ".state");
  if (!writer) return writer.status();
  if (Status s = writer->append(file.data(), file.size()); !s.is_ok()) return s;
  return writer->commit();
}

bool DegradedPath::restore_mirror(const std::string& path, std::vector<KnowledgeEntry>& entries) {
  if (!lexical_) return true;
  const auto not_used = [&](const Status& why) {
    if (why.code() != StatusCode::kNotFound) warn(fmt::format("the lexical index snapshot is not used ({}); building it", why.message()));
    return false;
  };
  auto file = detail::MappedFile::open(path + ".state");
  if (!file) return not_used(file.status());
  const std::size_t size = file->size();
  std::uint64_t length = 0, checksum = 0;
  if (size < kStateMagicBytes + 16 || std::memcmp(file->data(), kStateMagic, kStateMagicBytes) != 0) {
    return not_used(Status::data_loss(path + ".state: not a lexical index state file"));
  }
  std::memcpy(&length, file->data() + kStateMagicBytes, sizeof length);
  std::memcpy(&checksum, file->data() + size - sizeof checksum, sizeof checksum);
  if (length != size - kStateMagicBytes - 16 || detail::xxh64(file->data(), size - sizeof checksum) != checksum) {
    return not_used(Status::data_loss(path + ".state: damaged (length or checksum)"));
  }
  const std::string state(reinterpret_cast<const char*>(file->data()) + kStateMagicBytes + 8, length);
  // A failed restore below leaves this state in the encoder: mirror_all
  // then learns it again from the entries.
  if (Status s = lexical_encoder_->restore_learned_state(state); !s.is_ok()) return not_used(s);
  const std::size_t total = entries.size();
  auto restored = lexical_->restore_snapshot(path, lexical_encoder_->fingerprint(), entries);
  if (!restored) return not_used(restored.status());
  if (options_.log) {
    options_.log(LogLevel::kInfo, fmt::format("read the lexical index of {} entries from '{}'; encoded {}", total,
                                              path, restored->encoded_ids.size()));
  }
  return true;
}

void DegradedPath::mirror_entry(const std::string& id, const KnowledgeEntry* current) {
  if (!lexical_) return;
  Status s = Status::ok();
  if (current) {
    auto stored = lexical_->store_if_newer(*current);
    if (!stored) s = stored.status();
  } else if (lexical_->find(id)) {
    s = lexical_->remove(id);
  }
  if (!s.is_ok()) warn(fmt::format("lexical index of entry '{}': {}", id, s.message()));
}

void DegradedPath::reindex() {
  if (!lexical_) return;
  Status s = lexical_->reindex();
  if (!s.is_ok()) warn("lexical index: " + s.message());
}

std::optional<Answer> DegradedPath::lexical_answer(const std::string& question, std::size_t top_k) const {
  std::vector<float> v(lexical_encoder_->dimension());
  if (!lexical_encoder_->encode_one(question, v.data()).is_ok()) return std::nullopt;
  Answer a = answer_from_matches(lexical_->search(question, v.data(), std::max<std::size_t>(top_k, 1)),
                                 {options_.lexical_min_score, 0.0f, options_.fallback_answer});
  a.confidence = -1;  // the mirror's calibration is not the model's
  if (a.matches.size() > top_k) a.matches.resize(top_k);
  if (a.tier != AnswerTier::kKnowledge) return std::nullopt;
  return a;
}

Answer DegradedPath::answer(std::string reason, const CacheKey& key, const std::optional<Clock::time_point>& deadline,
                            std::size_t top_k, bool use_cache, const CacheTiers& tiers,
                            const KnowledgeBase& knowledge) const {
  if (lexical_ && (!deadline || options_.clock->now() < *deadline)) {
    if (auto a = lexical_answer(key.question, top_k)) {
      a->degraded = true;
      a->degraded_reason = reason + ": answered by lexical retrieval";
      return std::move(*a);
    }
    reason += "; lexical retrieval found no answer";
  } else if (lexical_) {
    reason += "; the deadline passed";
  }
  if (use_cache && options_.max_staleness.count() > 0) {
    if (auto stale = tiers.lookup_stale(key, options_.max_staleness, knowledge)) {
      stale->answer.degraded = true;
      stale->answer.degraded_reason = fmt::format("{}: cached answer served {:.1f} s past its TTL", reason,
                                                  std::chrono::duration<double>(stale->age).count());
      return std::move(stale->answer);
    }
  }
  Answer a;
  a.text = options_.fallback_answer;
  a.tier = AnswerTier::kFallback;
  a.degraded = true;
  a.degraded_reason = reason + ": no answer in time";
  return a;
}

}  // namespace rapidqa::engine
