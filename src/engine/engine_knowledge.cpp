#include "engine/engine_knowledge.h"

#include <utility>

#include <fmt/format.h>

#include "common/bounded_json.h"

namespace rapidqa::engine {

EngineKnowledge::EngineKnowledge(std::shared_ptr<Encoder> encoder, KnowledgeBaseOptions options, DegradedPath* mirror)
    : base_(std::move(encoder), std::move(options)), mirror_(mirror) {}

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

Result<cache::KnowledgeChange> EngineKnowledge::replace_all(std::vector<KnowledgeEntry> entries) {
  std::vector<KnowledgeEntry> mirror_copy;
  if (mirror_) mirror_copy = entries;
  Status s = base_.replace_all(std::move(entries));
  if (!s.is_ok()) return s;
  if (mirror_) mirror_->mirror_all(std::move(mirror_copy));
  cache::KnowledgeChange reload;
  reload.kind = cache::KnowledgeChange::Kind::kReload;
  return reload;
}

Result<cache::KnowledgeChange> EngineKnowledge::add(KnowledgeEntry entry) {
  const std::string id = entry.id;
  Status s = base_.add(std::move(entry));
  if (!s.is_ok()) return s;
  mirror(id);
  return upsert_change(id);
}

Result<cache::KnowledgeChange> EngineKnowledge::update(KnowledgeEntry entry) {
  const std::string id = entry.id;
  Status s = base_.update(std::move(entry));
  if (!s.is_ok()) return s;
  mirror(id);
  return upsert_change(id);
}

Result<cache::KnowledgeChange> EngineKnowledge::remove(const std::string& id) {
  Status s = base_.remove(id);
  if (!s.is_ok()) return s;
  mirror(id);
  cache::KnowledgeChange removal;
  removal.kind = cache::KnowledgeChange::Kind::kRemove;
  removal.entry_id = id;
  return removal;
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

Status EngineKnowledge::reindex() {
  Status s = base_.reindex();
  if (!s.is_ok()) return s;
  if (mirror_) mirror_->reindex();
  return s;
}

}  // namespace rapidqa::engine
