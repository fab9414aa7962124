// The compute runtime: one place that owns how many threads the numeric
// libraries use (LibTorch's intra-op pool, OpenMP as used by FAISS, OpenBLAS)
// so they do not oversubscribe the cores, and that reports what rapidqa was
// built and linked with.
//
// Thread safety: configure_compute_threads() should run once at start, before
// any model work; the query functions are thread-safe.
#pragma once

#include <string>

#include "rapidqa/export.h"
#include "rapidqa/status.h"

namespace rapidqa {

struct ComputeThreads {
  int intra_op = 0;  // threads for one model call (LibTorch, oneDNN, OpenBLAS); 0 = all cores
  int search = 1;    // threads one batched vector search spreads its queries over; 0 = 1
};

// The largest thread count configure_compute_threads() accepts: 4 x the
// cores std::thread::hardware_concurrency() reports, and at least 4.
RAPIDQA_EXPORT int max_compute_threads();

// Applies the thread counts process-wide. kInvalidArgument, naming the
// field and the limit, for a count below 0 or above max_compute_threads();
// nothing is changed then.
RAPIDQA_EXPORT Status configure_compute_threads(const ComputeThreads& threads);

// One line per component: rapidqa, LibTorch, FAISS, oneDNN, OpenBLAS (with
// its core type), utf8proc, and the thread counts in force.
RAPIDQA_EXPORT std::string build_info();

}  // namespace rapidqa
