// How the linear layers split one product y[M, N] = x[M, K] W^T into
// tasks for the WorkPool: the output columns into tiles fixed when the
// layer is built (each with its own packed weights and single-threaded
// kernel; two per pool thread), the rows into blocks only when there are
// many, so a task is never a tiny call and large batches still give every
// thread many tasks to balance.
//
// Thread safety: ColumnTiles is immutable; run_tiled may run concurrently.
#pragma once

#include <cstdint>
#include <functional>

namespace rapidqa::model {

class ColumnTiles {
 public:
  ColumnTiles() = default;
  // n output columns; the tile width follows from n and the compute
  // pool's size at construction (a multiple of 16).
  explicit ColumnTiles(std::int64_t n);

  std::int64_t columns() const { return n_; }
  std::int64_t width() const { return width_; }  // every tile's but maybe the last
  std::int64_t count() const { return n_ == 0 ? 0 : (n_ + width_ - 1) / width_; }
  std::int64_t begin(std::int64_t tile) const { return tile * width_; }
  std::int64_t size(std::int64_t tile) const;  // width, or the remainder for the last

 private:
  std::int64_t n_ = 0;
  std::int64_t width_ = 64;
};

// Runs task(first_row, row_count, tile) for every tile and row block of an
// M-row product, over the compute pool.
void run_tiled(std::int64_t rows, const ColumnTiles& tiles,
               const std::function<void(std::int64_t, std::int64_t, std::int64_t)>& task);

}  // namespace rapidqa::model
