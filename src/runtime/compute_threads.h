// Thread counts configured through configure_compute_threads(), for the
// layers that size their own parallel work.
#pragma once

namespace rapidqa::runtime {

// OpenMP threads for a FAISS search of more than one query (at least 1).
int configured_search_threads();

}  // namespace rapidqa::runtime
