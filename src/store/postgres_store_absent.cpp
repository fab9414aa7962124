// Built with -DRAPIDQA_WITH_POSTGRES=OFF: PostgreSQL URIs are refused.
#include "store/postgres_store.h"

namespace rapidqa::store {

Result<std::unique_ptr<KnowledgeStore>> open_postgres_store(const std::string&, const KnowledgeStoreOptions&) {
  return Status::failed_precondition(
      "this rapidqa was built without PostgreSQL support (-DRAPIDQA_WITH_POSTGRES=OFF); rebuild with libpq-dev");
}

}  // namespace rapidqa::store
