// Thread settings the layers that size their own parallel work share
// (the pools themselves: runtime/work_pool.h).
#pragma once

namespace rapidqa::train {

// Thread settings for training while it lasts: LibTorch's autograd spends
// its time in products it hands to OpenBLAS whole, so OpenBLAS gets the
// threads and LibTorch's own OpenMP team runs single (the inference runtime
// does the opposite: OpenBLAS single-threaded, products split over the
// intra-op threads). The destructor puts back the counts it found.
// Process-wide, like configure_compute_threads: not for use while models
// serve requests.
class ScopedTrainingThreads {
 public:
  explicit ScopedTrainingThreads(int threads);  // OpenBLAS threads; 0 = all cores
  ~ScopedTrainingThreads();
  ScopedTrainingThreads(const ScopedTrainingThreads&) = delete;
  ScopedTrainingThreads& operator=(const ScopedTrainingThreads&) = delete;

 private:
  int previous_intra_op_;
  int previous_blas_;  // 0 when OpenBLAS is not the BLAS linked
};

}  // namespace rapidqa::train
