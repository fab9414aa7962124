#include "train/training_threads.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <thread>

#include "runtime/openblas_controls.h"

namespace rapidqa::train {

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
}  // namespace rapidqa::train
