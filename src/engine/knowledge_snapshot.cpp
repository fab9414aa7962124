// KnowledgeBase::save_snapshot and restore_snapshot: the retrieval index
// read back at a restart instead of built (see knowledge_base.h).
//
// PATH holds the index (VectorIndex::save). PATH.labels, little-endian:
//   "RQKBL2\0\0"                       magic and format version
//   u64 index file size, u64 the body checksum its header records: the
//                                      index this file belongs to
//   u32 n, n bytes                     the encoder's fingerprint
//   i64 next label, u64 entry count
//   per entry, ordered by id (bytewise): u32 n, n bytes id; u64 version;
//     u32 label count; i64 labels
//   u64 XXH64 of everything before it
// Format 1 ("RQKBL1") named the index by the XXH64 of its whole file, so
// reading it hashed the index twice; it is still read, and saved again in
// format 2 at the next save.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string_view>

#include <fmt/format.h>

#include "common/atomic_file.h"
#include "common/checksum.h"
#include "common/mapped_file.h"
#include "engine/knowledge_base.h"
#include "index/index_snapshot.h"

namespace rapidqa::engine {
namespace {

constexpr std::size_t kMagicBytes = 8;
constexpr char kMagic[kMagicBytes] = {'R', 'Q', 'K', 'B', 'L', '2', 0, 0};
constexpr char kMagicFormat1[kMagicBytes] = {'R', 'Q', 'K', 'B', 'L', '1', 0, 0};

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
  // A length-prefixed string, viewed in place.
  bool read_view(std::string_view& out) {
    std::uint32_t length = 0;
    if (!read(length) || size_ - at_ < length) return false;
    out = std::string_view(reinterpret_cast<const char*>(data_ + at_), length);
    at_ += length;
    return true;
  }
  // `count` values of T, skipped over; their first byte, or null when the
  // file holds fewer.
  template <typename T>
  const std::uint8_t* skip(std::uint64_t count) {
    if ((size_ - at_) / sizeof(T) < count) return nullptr;
    const std::uint8_t* first = data_ + at_;
    at_ += count * sizeof(T);
    return first;
  }
  std::size_t left() const { return size_ - at_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

// One entry of the labels file, viewed in the mapped file.
struct SavedEntry {
  std::string_view id;
  std::uint64_t version = 0;
  std::uint32_t label_count = 0;
  const std::uint8_t* labels = nullptr;  // label_count i64s, unaligned

  std::int64_t label(std::size_t i) const {
    std::int64_t value;
    std::memcpy(&value, labels + i * sizeof value, sizeof value);
    return value;
  }
};

}  // namespace

Status KnowledgeBase::save_snapshot(const std::string& path, const std::string& fingerprint) const {
  if (Status s = index_.save(path); !s.is_ok()) return s;
  auto index_file = index::index_snapshot_identity(path);
  if (!index_file) return index_file.status();
  // Ordered by id, as a store lists its entries: the restart pairs the two
  // lists in one walk instead of hashing a million ids.
  std::vector<const std::pair<const std::string, StoredEntry>*> ordered;
  ordered.reserve(entries_.size());
  for (const auto& item : entries_) ordered.push_back(&item);
  std::sort(ordered.begin(), ordered.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  std::string body(kMagic, kMagicBytes);
  append_value<std::uint64_t>(body, index_file->file_size);
  append_value<std::uint64_t>(body, index_file->body_checksum);
  append_value<std::uint32_t>(body, static_cast<std::uint32_t>(fingerprint.size()));
  body += fingerprint;
  append_value<std::int64_t>(body, next_label_);
  append_value<std::uint64_t>(body, entries_.size());
  for (const auto* item : ordered) {
    const auto& [id, stored] = *item;
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

Result<index::VectorIndex> KnowledgeBase::load_snapshot_index(const std::string& path) const {
  return index::VectorIndex::load(path, index_.options());
}

Result<KnowledgeBase::SnapshotRestore> KnowledgeBase::restore_snapshot(const std::string& path,
                                                                      const std::string& fingerprint,
                                                                      std::vector<KnowledgeEntry>& entries,
                                                                      Result<index::VectorIndex>* preloaded) {
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
  if (labels_file->size() < kMagicBytes + 8) return damaged("not a labels file of this format");
  const bool format1 = std::memcmp(labels_file->data(), kMagicFormat1, kMagicBytes) == 0;
  if (!format1 && std::memcmp(labels_file->data(), kMagic, kMagicBytes) != 0) {
    return damaged("not a labels file of this format");
  }
  std::uint64_t stored_checksum = 0;
  std::memcpy(&stored_checksum, labels_file->data() + labels_file->size() - 8, 8);
  if (detail::xxh64(labels_file->data(), labels_file->size() - 8) != stored_checksum) {
    return damaged("checksum mismatch");
  }
  Reader in(labels_file->data() + kMagicBytes, labels_file->size() - kMagicBytes - 8);
  std::uint64_t index_size = 0, index_checksum = 0, count = 0;
  std::int64_t next_label = 0;
  std::string_view saved_fingerprint;
  if (!in.read(index_size) || !in.read(index_checksum) || !in.read_view(saved_fingerprint) ||
      !in.read(next_label) || !in.read(count)) {
    return damaged("truncated header");
  }
  if (next_label < 0) return damaged("a negative next label");
  if (saved_fingerprint != fingerprint) {
    return Status::failed_precondition(fmt::format("retrieval index snapshot '{}' was made by another encoder ({})",
                                                   path, saved_fingerprint));
  }
  // Which save the index file comes from: its header's body checksum (which
  // the load below verifies), or in format 1 the hash of the whole file.
  auto identity = index::index_snapshot_identity(path);
  if (!identity) return identity.status();
  std::uint64_t actual_size = identity->file_size, actual_checksum = identity->body_checksum;
  if (format1) {
    auto index_file = detail::MappedFile::open(path);
    if (!index_file) return index_file.status();
    actual_size = index_file->size();
    actual_checksum = detail::xxh64(index_file->data(), index_file->size());
  }
  if (actual_size != index_size || actual_checksum != index_checksum) {
    return damaged("the index file is not the one this labels file was saved with");
  }
  // Each entry is at least its three counts: a count the file cannot hold
  // is refused before anything is allocated for it.
  if (count > in.left() / 16) return damaged("truncated entry list");
  std::vector<SavedEntry> saved(static_cast<std::size_t>(count));
  for (SavedEntry& s : saved) {
    if (!in.read_view(s.id) || !in.read(s.version) || !in.read(s.label_count) ||
        !(s.labels = in.skip<std::int64_t>(s.label_count))) {
      return damaged("truncated entry list");
    }
  }
  const auto by_id = [](const SavedEntry& a, const SavedEntry& b) { return a.id < b.id; };
  if (!std::is_sorted(saved.begin(), saved.end(), by_id)) std::sort(saved.begin(), saved.end(), by_id);  // format 1
  for (std::size_t i = 1; i < saved.size(); ++i) {
    if (saved[i].id == saved[i - 1].id) return damaged("an entry is listed twice");
  }
  Result<index::VectorIndex> loaded =
      preloaded ? std::move(*preloaded) : Result<index::VectorIndex>(load_snapshot_index(path));
  if (!loaded) return loaded.status();
  index::VectorIndex index = std::move(loaded).value();
  // Every label in the index, and in one entry only (a label listed twice
  // would have one entry's change drop the other's vector).
  std::vector<bool> row_taken(index.row_count());
  for (const SavedEntry& s : saved) {
    for (std::size_t j = 0; j < s.label_count; ++j) {
      const std::int64_t label = s.label(j);
      const std::int64_t row = label < next_label ? index.row_of(label) : -1;
      if (row < 0) return damaged("a label is missing from the index");
      if (row_taken[static_cast<std::size_t>(row)]) return damaged("a label is listed for two phrasings");
      row_taken[static_cast<std::size_t>(row)] = true;
    }
  }

  // The entries in id order (a store lists them so; anything else is
  // sorted here), walked beside the saved list: what the snapshot holds at
  // the current version is kept, what it holds otherwise is dropped from
  // the index, and the entries without kept vectors are encoded below.
  // An entry without a version is at version 1 (as the store numbers them).
  const auto version_of = [](const KnowledgeEntry& e) { return std::max<std::uint64_t>(e.version, 1); };
  std::vector<std::size_t> order(entries.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const auto entry_before = [&](std::size_t a, std::size_t b) { return entries[a].id < entries[b].id; };
  if (!std::is_sorted(order.begin(), order.end(), entry_before)) std::sort(order.begin(), order.end(), entry_before);
  for (std::size_t k = 1; k < order.size(); ++k) {
    if (entries[order[k]].id == entries[order[k - 1]].id) {
      return Status::already_exists(fmt::format("duplicate entry id '{}'", entries[order[k]].id));
    }
  }
  std::vector<std::pair<std::size_t, const SavedEntry*>> kept;  // (entry, its saved labels)
  std::vector<std::size_t> encode_rows;
  const auto drop = [&](const SavedEntry& s) {  // removed or changed since the snapshot
    for (std::size_t j = 0; j < s.label_count; ++j) index.remove(s.label(j));
  };
  std::size_t next_saved = 0;
  for (const std::size_t i : order) {
    const KnowledgeEntry& e = entries[i];
    while (next_saved < saved.size() && saved[next_saved].id < e.id) drop(saved[next_saved++]);
    if (next_saved < saved.size() && saved[next_saved].id == e.id) {
      const SavedEntry& s = saved[next_saved++];
      if (s.version == version_of(e) && s.label_count == 1 + e.alternates.size()) {
        kept.emplace_back(i, &s);
        continue;
      }
      drop(s);
    }
    encode_rows.push_back(i);
  }
  while (next_saved < saved.size()) drop(saved[next_saved++]);

  // What changed since the save is encoded before any entry is moved, so a
  // failure leaves the caller's entries as they were.
  const std::size_t dim = encoder_->dimension();
  std::vector<float> encoded_vectors;
  constexpr std::size_t kChunk = 1000;
  for (std::size_t begin = 0; begin < encode_rows.size(); begin += kChunk) {
    const std::size_t end = std::min(encode_rows.size(), begin + kChunk);
    std::vector<const KnowledgeEntry*> chunk;
    for (std::size_t k = begin; k < end; ++k) chunk.push_back(&entries[encode_rows[k]]);
    Encoded encoded;
    if (Status s = encode_phrasings(chunk, encoded, nullptr, /*refit_encoder=*/false); !s.is_ok()) return s;
    encoded_vectors.insert(encoded_vectors.end(), encoded.vectors.begin(), encoded.vectors.end());
  }

  std::unordered_map<std::string, StoredEntry> stored;
  std::unordered_map<std::int64_t, const StoredEntry*> entry_of_label;
  stored.reserve(entries.size());
  entry_of_label.reserve(index.size() + encoded_vectors.size() / dim);
  for (const auto& [i, s] : kept) {
    StoredEntry& se = stored[entries[i].id];
    se.labels.resize(s->label_count);
    for (std::size_t j = 0; j < s->label_count; ++j) {
      se.labels[j] = s->label(j);
      entry_of_label.emplace(se.labels[j], &se);
    }
    se.entry = std::move(entries[i]);
    se.entry.version = version_of(se.entry);
  }
  SnapshotRestore restored;
  std::size_t row = 0;
  for (const std::size_t i : encode_rows) {
    StoredEntry& se = stored[entries[i].id];
    for (std::size_t j = 0; j < 1 + entries[i].alternates.size(); ++j, ++row) {
      const std::int64_t label = next_label++;
      index.upsert(label, encoded_vectors.data() + row * dim);
      entry_of_label.emplace(label, &se);
      se.labels.push_back(label);
    }
    restored.encoded_ids.push_back(entries[i].id);
    se.entry = std::move(entries[i]);
    se.entry.version = version_of(se.entry);
  }
  index_ = std::move(index);
  entries_ = std::move(stored);
  entry_of_label_ = std::move(entry_of_label);
  next_label_ = next_label;
  rebuild_ranking();
  restored.outdated_format = format1 || identity->format_version < index::kIndexSnapshotVersion;
  return restored;
}

}  // namespace rapidqa::engine
