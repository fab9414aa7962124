// The process-wide thread settings of every numeric library rapidqa links.
// LibTorch and oneDNN belong to the models library: when it is linked it
// defines the two hooks below (model/model_runtime.cpp), and the core, which
// never includes LibTorch, calls them through weak references.
#include "rapidqa/compute_runtime.h"

#include <faiss/Index.h>
#include <utf8proc.h>

#include <atomic>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "common/guard.h"
#include "runtime/openblas_controls.h"
#include "runtime/work_pool.h"
#include "rapidqa/version.h"

namespace rapidqa::model {
// Defined by the models library when it is linked; null otherwise.
[[gnu::weak]] void use_single_threaded_libraries();
[[gnu::weak]] std::string libraries_build_info();
}  // namespace rapidqa::model

namespace rapidqa {
namespace {
constexpr int kThreadsPerCore = 4;
constexpr int kMinThreadLimit = 4;
}  // namespace


int max_compute_threads() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // More threads than cores only adds contention; far more (a typo, a
  // hostile option) makes OpenMP start them all before returning, which
  // hangs creation for minutes. The floor keeps small machines usable.
  return std::max(kMinThreadLimit, kThreadsPerCore * cores);
}

Status configure_compute_threads(const ComputeThreads& threads) {
  const int limit = max_compute_threads();
  for (const auto& [field, value] : {std::pair<const char*, int>{"intra_op", threads.intra_op},
                                     std::pair<const char*, int>{"search", threads.search}}) {
    if (value < 0 || value > limit) {
      return Status::invalid_argument(fmt::format(
          "thread count {} = {} is out of range: expected 0 (automatic) to {} ({} x the {} cores, at least {})",
          field, value, limit, kThreadsPerCore, std::max(1u, std::thread::hardware_concurrency()), kMinThreadLimit));
    }
  }
  return detail::guarded("configuring compute threads", [&]() -> Status {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int intra = threads.intra_op == 0 ? cores : threads.intra_op;
    const int search = threads.search == 0 ? 1 : threads.search;
    // One pool: the runtime's WorkPool (runtime/work_pool.h). The model
    // runtime splits every product, head and row block into tasks on it and
    // runs oneDNN and OpenBLAS single-threaded inside each; LibTorch's own
    // OpenMP team and OpenBLAS's pthreads would only fight it for the cores
    // (and OpenMP's spinning barrier collapses when the host takes a core),
    // so both run single-threaded.
    runtime::resize_compute_pool(intra);
    if (model::use_single_threaded_libraries) model::use_single_threaded_libraries();
    if (openblas_set_num_threads) openblas_set_num_threads(1);
    // Batched vector searches spread their queries over a pool of their
    // own (index::VectorIndex::search_batch), apart from the model's.
    runtime::resize_search_pool(search);
    return Status::ok();
  });
}

std::string build_info() {
  std::string info;
  info += fmt::format("rapidqa   {}\n", RAPIDQA_VERSION_STRING);
  info += fmt::format("threads   model pool {}, search pool {}\n", runtime::compute_pool()->threads(),
                      runtime::search_pool()->threads());
  info += model::libraries_build_info ? model::libraries_build_info()
                                      : std::string("models    not linked (no LibTorch, no oneDNN)\n");
  info += fmt::format("FAISS     {}.{}.{}\n", FAISS_VERSION_MAJOR, FAISS_VERSION_MINOR, FAISS_VERSION_PATCH);
  if (openblas_get_config) {
    info += fmt::format("OpenBLAS  {} core {} (threads {})\n", openblas_get_config(),
                        openblas_get_corename ? openblas_get_corename() : "?",
                        openblas_get_num_threads ? openblas_get_num_threads() : 0);
  } else {
    info += "BLAS      not OpenBLAS (matrix products will be slow)\n";
  }
  info += fmt::format("utf8proc  {}\n", utf8proc_version());
  return info;
}

}  // namespace rapidqa
