// The rules every store applies to one change before committing it, so the
// SQLite and PostgreSQL stores refuse the same changes with the same
// messages.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "rapidqa/knowledge_store.h"

namespace rapidqa::store {

// kInvalidArgument for a bad entry or a removal without an id;
// kAlreadyExists for adding a current id; kNotFound for updating or
// removing an id that is not current.
Status check_change(const StoreChange& change, bool is_current);

// "change 3 of 10: <reason>" for a refusal inside a batch; the reason alone
// for a single change.
Status in_batch(const Status& refusal, std::size_t index, std::size_t count);

// A stored row back as an entry: `body` is the entry as a JSONL line.
// kDataLoss naming the store, the entry and the version when it does not
// parse.
Result<KnowledgeEntry> entry_from_body(std::string_view id, std::uint64_t version, std::string_view body,
                                       const std::string& store_name);
// entry_at(i) for every i below count, on a few threads (a restart parses
// every current entry: a million at a large store), in row order; the
// failure of the first row that fails.
Result<std::vector<KnowledgeEntry>> entries_in_parallel(
    std::size_t count, const std::function<Result<KnowledgeEntry>(std::size_t)>& entry_at);
// A history row back as an EntryVersion (a removal carries only the id).
Result<EntryVersion> entry_version_from(const std::string& id, std::uint64_t version, bool removed,
                                        std::int64_t committed_at_ms, const std::string& body,
                                        const std::string& store_name);

}  // namespace rapidqa::store
