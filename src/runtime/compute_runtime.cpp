// The only place outside the model runtime that includes LibTorch: it owns
// the process-wide thread settings of every numeric library we link.
#include "rapidqa/compute_runtime.h"

#include <ATen/Parallel.h>
#include <faiss/Index.h>
#include <oneapi/dnnl/dnnl.h>
#include <torch/version.h>
#include <utf8proc.h>

#include <atomic>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "common/guard.h"
#include "runtime/compute_threads.h"
#include "runtime/work_pool.h"
#include "rapidqa/rapidqa.h"

// OpenBLAS's own controls; weak so a build against another BLAS still links.
extern "C" {
void openblas_set_num_threads(int num_threads) __attribute__((weak));
int openblas_get_num_threads(void) __attribute__((weak));
char* openblas_get_corename(void) __attribute__((weak));
char* openblas_get_config(void) __attribute__((weak));
}

namespace rapidqa {
namespace {
constexpr int kThreadsPerCore = 4;
constexpr int kMinThreadLimit = 4;
}  // namespace

namespace runtime {

ScopedTrainingThreads::ScopedTrainingThreads(int threads)
    : previous_intra_op_(at::get_num_threads()),
      previous_blas_(openblas_get_num_threads ? openblas_get_num_threads() : 0) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int wanted = threads > 0 ? threads : cores;
  // One team again, the other way round: OpenBLAS's. Between two products
  // an idle OpenMP team spins and takes the cores from OpenBLAS's threads
  // (twice the time per epoch, measured); LibTorch's element-wise work is
  // small next to the products.
  if (at::get_num_threads() != 1) at::set_num_threads(1);
  if (openblas_set_num_threads) openblas_set_num_threads(wanted);
}

ScopedTrainingThreads::~ScopedTrainingThreads() {
  if (at::get_num_threads() != previous_intra_op_) at::set_num_threads(previous_intra_op_);
  if (openblas_set_num_threads && previous_blas_ > 0) openblas_set_num_threads(previous_blas_);
}
}  // namespace runtime

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
    if (at::get_num_threads() != 1) at::set_num_threads(1);
    if (openblas_set_num_threads) openblas_set_num_threads(1);
    // Batched vector searches spread their queries over a pool of their
    // own (index::VectorIndex::search_batch), apart from the model's.
    runtime::resize_search_pool(search);
    return Status::ok();
  });
}

std::string build_info() {
  const dnnl_version_t* dnnl = dnnl_version();
  std::string info;
  info += fmt::format("rapidqa   {}\n", rqa_version());
  info += fmt::format("LibTorch  {}.{}.{} (its own intra-op threads {}; the runtime's pool {})\n", TORCH_VERSION_MAJOR,
                      TORCH_VERSION_MINOR, TORCH_VERSION_PATCH, at::get_num_threads(),
                      runtime::compute_pool()->threads());
  info += fmt::format("FAISS     {}.{}.{} (search threads {})\n", FAISS_VERSION_MAJOR, FAISS_VERSION_MINOR,
                      FAISS_VERSION_PATCH, runtime::search_pool()->threads());
  info += fmt::format("oneDNN    {}.{}.{} (cpu runtime {})\n", dnnl->major, dnnl->minor, dnnl->patch,
                      dnnl->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other");
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
