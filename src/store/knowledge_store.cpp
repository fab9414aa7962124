#include "rapidqa/knowledge_store.h"

#include <cstdio>
#include <algorithm>
#include <fstream>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "common/bounded_json.h"
#include "common/guard.h"
#include "common/parallel_parts.h"
#include "knowledge/entry_reader.h"
#include "store/change_rules.h"
#include "store/postgres_store.h"
#include "store/sqlite_store.h"

namespace rapidqa {

Result<std::unique_ptr<KnowledgeStore>> KnowledgeStore::open(const std::string& uri,
                                                             const KnowledgeStoreOptions& options) {
  return detail::guarded("opening a knowledge store", [&]() -> Result<std::unique_ptr<KnowledgeStore>> {
    const auto starts_with = [&](const char* scheme) { return uri.rfind(scheme, 0) == 0; };
    if (starts_with("sqlite:")) return store::open_sqlite_store(uri.substr(7), uri, options);
    if (starts_with("postgresql://") || starts_with("postgres://")) {
      return store::open_postgres_store(uri, options);
    }
    return Status::invalid_argument(
        fmt::format("knowledge store '{}': unknown kind; expected sqlite:PATH or postgresql://...",
                    detail::clip_for_message(uri)));
  });
}

namespace {

// A store without other writers has nothing to report.
class QuietWatch final : public StoreWatch {
 public:
  bool connected() const override { return true; }
};

}  // namespace

Result<std::unique_ptr<StoreWatch>> KnowledgeStore::watch(StoreWatcher) {
  return std::unique_ptr<StoreWatch>(new QuietWatch());
}

namespace store {

Status check_change(const StoreChange& change, bool is_current) {
  using Kind = StoreChange::Kind;
  const std::string& id = change.id();
  if (change.kind != Kind::kRemove) {
    if (Status valid = validate_entry(change.entry); !valid.is_ok()) {
      return Status::invalid_argument(fmt::format("entry '{}': {}", detail::clip_for_message(id), valid.message()));
    }
  } else if (id.empty()) {
    return Status::invalid_argument("a removal names no entry id");
  }
  if (change.kind == Kind::kAdd && is_current) {
    return Status::already_exists(fmt::format("entry id '{}' already exists", detail::clip_for_message(id)));
  }
  if ((change.kind == Kind::kUpdate || change.kind == Kind::kRemove) && !is_current) {
    return Status::not_found(fmt::format("no entry with id '{}'", detail::clip_for_message(id)));
  }
  return Status::ok();
}

Result<KnowledgeEntry> entry_from_body(std::string_view id, std::uint64_t version, std::string_view body,
                                       const std::string& store_name) {
  auto entry = detail::parse_knowledge_entry(body);
  if (!entry) {
    return Status::data_loss(fmt::format("{}: version {} of entry '{}' is stored damaged: {}", store_name, version,
                                         detail::clip_for_message(id), entry.status().message()));
  }
  entry->version = version;
  return entry;
}

Result<std::vector<KnowledgeEntry>> entries_in_parallel(
    std::size_t count, const std::function<Result<KnowledgeEntry>(std::size_t)>& entry_at) {
  constexpr std::size_t kRowsPerThread = 8192;  // below this a thread costs more than it saves
  const std::size_t threads = detail::threads_for(count, kRowsPerThread);
  std::vector<KnowledgeEntry> entries(count);
  std::vector<Status> failures(threads);
  std::vector<std::size_t> failed_at(threads, count);
  detail::run_parts(threads, threads, [&](std::size_t part) {
    const std::size_t begin = count * part / threads, end = count * (part + 1) / threads;
    for (std::size_t i = begin; i < end; ++i) {
      auto entry = entry_at(i);
      if (!entry) {
        failures[part] = entry.status();
        failed_at[part] = i;
        return;
      }
      entries[i] = std::move(entry).value();
    }
  });
  for (std::size_t part = 0; part < threads; ++part) {
    if (failed_at[part] != count) return failures[part];
  }
  return entries;
}

Result<EntryVersion> entry_version_from(const std::string& id, std::uint64_t version, bool removed,
                                        std::int64_t committed_at_ms, const std::string& body,
                                        const std::string& store_name) {
  EntryVersion v;
  v.version = version;
  v.removed = removed;
  v.committed_at_ms = committed_at_ms;
  if (removed) {
    v.entry.id = id;
    v.entry.version = version;
    return v;
  }
  auto entry = entry_from_body(id, version, body, store_name);
  if (!entry) return entry.status();
  v.entry = std::move(entry).value();
  return v;
}

Status in_batch(const Status& refusal, std::size_t index, std::size_t count) {
  if (count == 1) return refusal;
  return Status(refusal.code(), fmt::format("change {} of {}: {}", index + 1, count, refusal.message()));
}

}  // namespace store

bool same_entry_content(const KnowledgeEntry& a, const KnowledgeEntry& b) {
  return a.id == b.id && a.question == b.question && a.alternates == b.alternates && a.answer == b.answer &&
         a.context == b.context && a.tags == b.tags && a.cache_ttl == b.cache_ttl;
}

Result<StoreChange> rollback_change(KnowledgeStore& store, const std::string& id, std::uint64_t version) {
  auto old = store.version_of(id, version);
  if (!old) return old.status();
  if (!old->removed) return StoreChange::put(std::move(old->entry));
  auto history = store.history(id);
  if (!history) return history.status();
  if (history->back().removed) {
    return Status::failed_precondition(fmt::format("entry '{}' is already removed; version {} was a removal",
                                                   detail::clip_for_message(id), version));
  }
  return StoreChange::remove(id);
}

Result<StoreImportReport> replace_store_entries(KnowledgeStore& store, std::vector<KnowledgeEntry> entries,
                                                const StoreProgress& progress) {
  return detail::guarded("replacing the stored entries", [&]() -> Result<StoreImportReport> {
    std::unordered_set<std::string> ids;
    for (const auto& e : entries) {
      if (!ids.insert(e.id).second) {
        return Status::already_exists(fmt::format("duplicate entry id '{}'", detail::clip_for_message(e.id)));
      }
    }
    auto current = store.load_current();
    if (!current) return current.status();
    std::unordered_map<std::string, const KnowledgeEntry*> stored;
    for (const auto& e : *current) stored.emplace(e.id, &e);

    StoreImportReport report;
    std::vector<StoreChange> changes;
    for (auto& e : entries) {
      const auto it = stored.find(e.id);
      if (it == stored.end()) {
        ++report.added;
      } else if (same_entry_content(*it->second, e)) {
        ++report.unchanged;  // an unchanged entry keeps its version, and the answers cached from it
        continue;
      } else {
        ++report.updated;
      }
      changes.push_back(StoreChange::put(std::move(e)));
    }
    for (const auto& e : *current) {
      if (ids.count(e.id)) continue;
      ++report.removed;
      changes.push_back(StoreChange::remove(e.id));
    }
    if (changes.empty()) {
      if (progress) progress(0, 0);
      return report;
    }
    auto committed = store.commit(changes, progress);
    if (!committed) return committed.status();
    return report;
  });
}

Result<StoreImportReport> import_knowledge_file(KnowledgeStore& store, const std::string& path,
                                                const KnowledgeFileOptions& file_options,
                                                const StoreProgress& progress) {
  auto file = read_knowledge_file(path, file_options);
  if (!file) return file.status();
  auto report = replace_store_entries(store, std::move(file->entries), progress);
  if (!report) return Status(report.status().code(), fmt::format("{}: {}", path, report.status().message()));
  report->skipped = std::move(file->skipped);
  return report;
}

Result<std::size_t> export_knowledge_file(KnowledgeStore& store, const std::string& path) {
  return detail::guarded("exporting the store", [&]() -> Result<std::size_t> {
    auto entries = store.load_current();
    if (!entries) return entries.status();
    const std::string partial = path + ".partial";
    {
      std::ofstream out(partial, std::ios::binary | std::ios::trunc);
      if (!out) return Status::io_error(fmt::format("cannot write '{}'", partial));
      for (const auto& e : *entries) out << knowledge_entry_to_json(e) << '\n';
      out.flush();
      if (!out) {
        std::remove(partial.c_str());
        return Status::io_error(fmt::format("writing '{}' failed (disk full?)", partial));
      }
    }
    if (std::rename(partial.c_str(), path.c_str()) != 0) {
      std::remove(partial.c_str());
      return Status::io_error(fmt::format("cannot move the export into place at '{}'", path));
    }
    return entries->size();
  });
}

}  // namespace rapidqa
