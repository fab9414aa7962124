#include "engine/engine_knowledge.h"

#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "common/bounded_json.h"

namespace rapidqa::engine {

namespace {

// The rare case where the store took a change the memory then refused (the
// encoder failed on text that passed check_phrasings): the caller learns
// that the change is durable even though this engine does not serve it yet.
Status committed_but_not_applied(const std::string& what, const Status& cause) {
  return Status(cause.code(), fmt::format("{} was committed to the store but could not be applied in memory ({}); "
                                          "the engine serves it once reopened on the store",
                                          what, cause.message()));
}

}  // namespace

EngineKnowledge::EngineKnowledge(std::shared_ptr<Encoder> encoder, KnowledgeBaseOptions options, DegradedPath* mirror,
                                 std::unique_ptr<KnowledgeStore> store)
    : base_(std::move(encoder), std::move(options)), mirror_(mirror), store_(std::move(store)) {}

void EngineKnowledge::mirror(const std::string& id) {
  if (mirror_) mirror_->mirror_entry(id, base_.find(id));
}

cache::KnowledgeChange EngineKnowledge::upsert_change(const std::string& id) const {
  cache::KnowledgeChange change;
  change.kind = cache::KnowledgeChange::Kind::kUpsert;
  change.entry_id = id;
  if (const KnowledgeEntry* stored = base_.find(id)) {
    change.version = stored->version;
    change.entry = *stored;
  }
  return change;
}

cache::KnowledgeChange EngineKnowledge::removal_change(const std::string& id) const {
  cache::KnowledgeChange removal;
  removal.kind = cache::KnowledgeChange::Kind::kRemove;
  removal.entry_id = id;
  return removal;
}

Result<cache::KnowledgeChange> EngineKnowledge::load_from_store() {
  auto entries = store_->load_current();
  if (!entries) return entries.status();
  return replace_in_memory(std::move(entries).value());
}

Result<cache::KnowledgeChange> EngineKnowledge::replace_in_memory(std::vector<KnowledgeEntry> entries) {
  std::vector<KnowledgeEntry> mirror_copy;
  if (mirror_) mirror_copy = entries;
  Status s = base_.replace_all(std::move(entries));
  if (!s.is_ok()) return s;
  if (mirror_) mirror_->mirror_all(std::move(mirror_copy));
  cache::KnowledgeChange reload;
  reload.kind = cache::KnowledgeChange::Kind::kReload;
  return reload;
}

Result<cache::KnowledgeChange> EngineKnowledge::commit_then_apply(StoreChange change) {
  const std::string id = change.id();
  if (change.kind != StoreChange::Kind::kRemove) {
    if (Status s = base_.check_phrasings(change.entry); !s.is_ok()) return s;
  }
  auto committed = store_->commit({change});
  if (!committed) return committed.status();
  const CommittedVersion& version = committed->front();
  if (version.removed) {
    if (base_.find(id)) {
      Status s = base_.remove(id);
      if (!s.is_ok()) return committed_but_not_applied(fmt::format("removing entry '{}'", id), s);
    }
    mirror(id);
    return removal_change(id);
  }
  Status s = base_.put(std::move(change.entry), version.version);
  if (!s.is_ok()) return committed_but_not_applied(fmt::format("version {} of entry '{}'", version.version, id), s);
  mirror(id);
  return upsert_change(id);
}

Result<cache::KnowledgeChange> EngineKnowledge::replace_all(std::vector<KnowledgeEntry> entries) {
  if (store_) {
    // Refused phrasings before the commit, so a bad file changes nothing.
    for (const auto& e : entries) {
      if (Status s = base_.check_phrasings(e); !s.is_ok()) return s;
    }
    auto replaced = replace_store_entries(*store_, std::move(entries));
    if (!replaced) return replaced.status();
    auto reload = load_from_store();
    if (!reload) return committed_but_not_applied("the new knowledge", reload.status());
    return reload;
  }
  return replace_in_memory(std::move(entries));
}

Result<cache::KnowledgeChange> EngineKnowledge::add(KnowledgeEntry entry) {
  if (store_) return commit_then_apply(StoreChange::add(std::move(entry)));
  const std::string id = entry.id;
  Status s = base_.add(std::move(entry));
  if (!s.is_ok()) return s;
  mirror(id);
  return upsert_change(id);
}

Result<cache::KnowledgeChange> EngineKnowledge::update(KnowledgeEntry entry) {
  if (store_) return commit_then_apply(StoreChange::update(std::move(entry)));
  const std::string id = entry.id;
  Status s = base_.update(std::move(entry));
  if (!s.is_ok()) return s;
  mirror(id);
  return upsert_change(id);
}

Result<cache::KnowledgeChange> EngineKnowledge::remove(const std::string& id) {
  if (store_) return commit_then_apply(StoreChange::remove(id));
  Status s = base_.remove(id);
  if (!s.is_ok()) return s;
  mirror(id);
  return removal_change(id);
}

Result<cache::KnowledgeChange> EngineKnowledge::rollback(const std::string& id, std::uint64_t version) {
  if (!store_) return Status::failed_precondition("rolling back needs a knowledge store (EngineOptions::knowledge_store)");
  auto change = rollback_change(*store_, id, version);
  if (!change) return change.status();
  return commit_then_apply(std::move(change).value());
}

void EngineKnowledge::apply_remote(const cache::KnowledgeChange& change, const LogSink& log) {
  using Kind = cache::KnowledgeChange::Kind;
  if (change.kind == Kind::kUpsert && change.entry) {
    KnowledgeEntry entry = *change.entry;
    entry.version = change.version;
    auto applied = base_.store_if_newer(std::move(entry));
    if (!applied && log) {
      log(LogLevel::kWarning, fmt::format("change to entry '{}' from instance {} not applied: {}",
                                          detail::clip_for_message(change.entry_id),
                                          detail::clip_for_message(change.origin), applied.status().message()));
    }
  } else if (change.kind == Kind::kRemove && base_.find(change.entry_id)) {
    (void)base_.remove(change.entry_id);
  }
  mirror(change.entry_id);
}

Result<std::vector<cache::KnowledgeChange>> EngineKnowledge::follow_store(const std::vector<std::string>* entry_ids,
                                                                          const LogSink& log) {
  auto stored = entry_ids ? store_->load_current(*entry_ids) : store_->load_current();
  if (!stored) return stored.status();
  std::vector<cache::KnowledgeChange> events;
  std::unordered_set<std::string> current;
  for (KnowledgeEntry& entry : *stored) {
    const std::string id = entry.id;
    current.insert(id);
    const KnowledgeEntry* local = base_.find(id);
    if (local && local->version == entry.version) continue;
    const std::uint64_t version = entry.version;
    if (Status s = base_.put(std::move(entry), version); !s.is_ok()) {
      if (log) {
        log(LogLevel::kWarning, fmt::format("version {} of entry '{}' from the store not applied: {}", version,
                                            detail::clip_for_message(id), s.message()));
      }
      continue;
    }
    mirror(id);
    events.push_back(upsert_change(id));
  }
  for (const std::string& id : entry_ids ? *entry_ids : base_.ids()) {
    if (current.count(id) || !base_.find(id)) continue;
    (void)base_.remove(id);
    mirror(id);
    events.push_back(removal_change(id));
  }
  if (events.size() > 1000) {
    events.clear();
    cache::KnowledgeChange reload;
    reload.kind = cache::KnowledgeChange::Kind::kReload;
    events.push_back(std::move(reload));
  }
  return events;
}

Status EngineKnowledge::reindex() {
  Status s = base_.reindex();
  if (!s.is_ok()) return s;
  if (mirror_) mirror_->reindex();
  return s;
}

}  // namespace rapidqa::engine
