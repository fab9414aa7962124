// KnowledgeBase::save_snapshot and restore_snapshot: the retrieval index
// read back at a restart instead of built (see knowledge_base.h).
//
// PATH holds the index (VectorIndex::save). PATH.labels, little-endian:
//   "RQKBL1\0\0"                       magic and format version
//   u64 index file size, u64 its XXH64 the index this file belongs to
//   u32 n, n bytes                     the encoder's fingerprint
//   i64 next label, u64 entry count
//   per entry: u32 n, n bytes id; u64 version; u32 label count; i64 labels
//   u64 XXH64 of everything before it
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include <fmt/format.h>

#include "common/atomic_file.h"
#include "common/checksum.h"
#include "common/mapped_file.h"
#include "engine/knowledge_base.h"

namespace rapidqa::engine {
namespace {

constexpr char kMagic[8] = {'R', 'Q', 'K', 'B', 'L', '1', 0, 0};

template <typename T>
void append_value(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

// Reads the labels file front to back; every read is bounded by its size.
class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  template <typename T>
  bool read(T& value) {
    if (size_ - at_ < sizeof(T)) return false;
    std::memcpy(&value, data_ + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool read_string(std::string& out) {
    std::uint32_t length = 0;
    if (!read(length) || size_ - at_ < length) return false;
    out.assign(reinterpret_cast<const char*>(data_ + at_), length);
    at_ += length;
    return true;
  }
  std::size_t left() const { return size_ - at_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

Result<std::pair<std::uint64_t, std::uint64_t>> size_and_checksum(const std::string& path) {
  auto mapped = detail::MappedFile::open(path);
  if (!mapped) return mapped.status();
  return std::make_pair<std::uint64_t, std::uint64_t>(mapped->size(), detail::xxh64(mapped->data(), mapped->size()));
}

}  // namespace

Status KnowledgeBase::save_snapshot(const std::string& path, const std::string& fingerprint) const {
  if (Status s = index_.save(path); !s.is_ok()) return s;
  auto index_file = size_and_checksum(path);
  if (!index_file) return index_file.status();
  std::string body(kMagic, sizeof(kMagic));
  append_value<std::uint64_t>(body, index_file->first);
  append_value<std::uint64_t>(body, index_file->second);
  append_value<std::uint32_t>(body, static_cast<std::uint32_t>(fingerprint.size()));
  body += fingerprint;
  append_value<std::int64_t>(body, next_label_);
  append_value<std::uint64_t>(body, entries_.size());
  for (const auto& [id, stored] : entries_) {
    append_value<std::uint32_t>(body, static_cast<std::uint32_t>(id.size()));
    body += id;
    append_value<std::uint64_t>(body, stored.entry.version);
    append_value<std::uint32_t>(body, static_cast<std::uint32_t>(stored.labels.size()));
    for (const std::int64_t label : stored.labels) append_value<std::int64_t>(body, label);
  }
  append_value<std::uint64_t>(body, detail::xxh64(body.data(), body.size()));
  auto writer = detail::AtomicFileWriter::create(path + ".labels");
  if (!writer) return writer.status();
  if (Status s = writer->append(body.data(), body.size()); !s.is_ok()) return s;
  return writer->commit();
}

Result<std::vector<std::string>> KnowledgeBase::restore_snapshot(const std::string& path,
                                                                 const std::string& fingerprint,
                                                                 std::vector<KnowledgeEntry> entries) {
  const std::string labels_path = path + ".labels";
  struct stat info {};
  if (::stat(labels_path.c_str(), &info) != 0 || ::stat(path.c_str(), &info) != 0) {
    return Status::not_found(fmt::format("no retrieval index snapshot at '{}'", path));
  }
  auto labels_file = detail::MappedFile::open(labels_path);
  if (!labels_file) return labels_file.status();
  const auto damaged = [&](const char* what) {
    return Status::data_loss(fmt::format("retrieval index snapshot '{}': {}", labels_path, what));
  };
  if (labels_file->size() < sizeof(kMagic) + 8 ||
      std::memcmp(labels_file->data(), kMagic, sizeof(kMagic)) != 0) {
    return damaged("not a labels file of this format");
  }
  std::uint64_t stored_checksum = 0;
  std::memcpy(&stored_checksum, labels_file->data() + labels_file->size() - 8, 8);
  if (detail::xxh64(labels_file->data(), labels_file->size() - 8) != stored_checksum) {
    return damaged("checksum mismatch");
  }
  Reader in(labels_file->data() + sizeof(kMagic), labels_file->size() - sizeof(kMagic) - 8);
  std::uint64_t index_size = 0, index_checksum = 0, count = 0;
  std::int64_t next_label = 0;
  std::string saved_fingerprint;
  if (!in.read(index_size) || !in.read(index_checksum) || !in.read_string(saved_fingerprint) ||
      !in.read(next_label) || !in.read(count)) {
    return damaged("truncated header");
  }
  if (saved_fingerprint != fingerprint) {
    return Status::failed_precondition(fmt::format("retrieval index snapshot '{}' was made by another encoder ({})",
                                                   path, saved_fingerprint));
  }
  auto index_file = size_and_checksum(path);
  if (!index_file) return index_file.status();
  if (index_file->first != index_size || index_file->second != index_checksum) {
    return damaged("the index file is not the one this labels file was saved with");
  }
  struct Saved {
    std::uint64_t version;
    std::vector<std::int64_t> labels;
  };
  std::unordered_map<std::string, Saved> saved;
  saved.reserve(std::min<std::uint64_t>(count, in.left() / 16));
  for (std::uint64_t i = 0; i < count; ++i) {
    std::string id;
    Saved s;
    std::uint32_t label_count = 0;
    if (!in.read_string(id) || !in.read(s.version) || !in.read(label_count) || in.left() / 8 < label_count) {
      return damaged("truncated entry list");
    }
    s.labels.resize(label_count);
    for (auto& label : s.labels) in.read(label);
    saved.emplace(std::move(id), std::move(s));
  }
  auto loaded = index::VectorIndex::load(path, index_.options());
  if (!loaded) return loaded.status();
  index::VectorIndex index = std::move(loaded).value();

  // Keep what the snapshot holds at the current version; drop the rest
  // from the index; the entries without kept vectors are encoded below.
  std::unordered_set<std::string> ids;
  std::unordered_map<std::string, StoredEntry> stored;
  std::unordered_map<std::int64_t, std::string> label_to_id;
  std::vector<const KnowledgeEntry*> to_encode;
  for (auto& e : entries) {
    if (!ids.insert(e.id).second) return Status::already_exists(fmt::format("duplicate entry id '{}'", e.id));
    if (e.version == 0) e.version = 1;
  }
  for (auto& [id, s] : saved) {
    const bool labels_present = std::all_of(s.labels.begin(), s.labels.end(),
                                            [&](std::int64_t label) { return label < next_label && index.contains(label); });
    if (!labels_present) return damaged("a label is missing from the index");
  }
  std::vector<std::size_t> encode_rows;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    KnowledgeEntry& e = entries[i];
    const auto it = saved.find(e.id);
    if (it != saved.end() && it->second.version == e.version && it->second.labels.size() == 1 + e.alternates.size()) {
      StoredEntry se;
      se.labels = it->second.labels;
      for (const std::int64_t label : se.labels) label_to_id.emplace(label, e.id);
      saved.erase(it);
      se.entry = std::move(e);
      stored.emplace(se.entry.id, std::move(se));
    } else {
      encode_rows.push_back(i);
    }
  }
  for (const auto& [id, s] : saved) {  // removed or changed since the snapshot
    for (const std::int64_t label : s.labels) index.remove(label);
  }
  std::vector<std::string> encoded_ids;
  const std::size_t dim = encoder_->dimension();
  constexpr std::size_t kChunk = 1000;
  for (std::size_t begin = 0; begin < encode_rows.size(); begin += kChunk) {
    const std::size_t end = std::min(encode_rows.size(), begin + kChunk);
    std::vector<const KnowledgeEntry*> chunk;
    for (std::size_t k = begin; k < end; ++k) chunk.push_back(&entries[encode_rows[k]]);
    Encoded encoded;
    if (Status s = encode_phrasings(chunk, encoded, nullptr, /*refit_encoder=*/false); !s.is_ok()) return s;
    std::size_t row = 0;
    for (std::size_t k = begin; k < end; ++k) {
      KnowledgeEntry& e = entries[encode_rows[k]];
      StoredEntry se;
      for (std::size_t j = 0; j < 1 + e.alternates.size(); ++j, ++row) {
        const std::int64_t label = next_label++;
        index.upsert(label, encoded.vectors.data() + row * dim);
        label_to_id.emplace(label, e.id);
        se.labels.push_back(label);
      }
      encoded_ids.push_back(e.id);
      se.entry = std::move(e);
      stored.emplace(se.entry.id, std::move(se));
    }
  }
  index_ = std::move(index);
  entries_ = std::move(stored);
  label_to_id_ = std::move(label_to_id);
  next_label_ = next_label;
  return encoded_ids;
}

}  // namespace rapidqa::engine
