#include "model/tiled_matmul.h"

#include <algorithm>

#include "runtime/work_pool.h"

namespace rapidqa::model {
namespace {

// Tile widths are multiples of 16 floats (one AVX-512 register), as few
// per layer as still gives each thread of the pool kTilesPerThread tiles,
// and as equal as that allows: BERT widths then split into equal tiles
// (1152 = 4 x 288), where multiples of 64 left a short last tile and a
// thread idle at the end of every product.
constexpr std::int64_t kUnit = 16;
// Two measured best (one product per call at 1 x 32 costs a few
// microseconds per tile, so more tiles cost more than the balance they buy,
// also with a competing thread); row blocks add tasks for large batches.
constexpr std::int64_t kTilesPerThread = 2;
// Above this many rows a product is split into row blocks of this size
// too: large batches give plenty of tasks, and a block's rows then stay
// in cache across the tile's weights.
constexpr std::int64_t kRowBlock = 64;
constexpr std::int64_t kSplitRowsAbove = 128;

}  // namespace

ColumnTiles::ColumnTiles(std::int64_t n) : n_(n) {
  const std::int64_t units = (n + kUnit - 1) / kUnit;
  const std::int64_t target = kTilesPerThread * runtime::compute_pool()->threads();
  width_ = kUnit * std::max<std::int64_t>(1, (units + target - 1) / target);
}

std::int64_t ColumnTiles::size(std::int64_t tile) const { return std::min(width_, n_ - tile * width_); }

void run_tiled(std::int64_t rows, const ColumnTiles& tiles,
               const std::function<void(std::int64_t, std::int64_t, std::int64_t)>& task) {
  if (rows <= 0 || tiles.count() == 0) return;
  const std::int64_t block = rows > kSplitRowsAbove ? kRowBlock : rows;
  const std::int64_t blocks = (rows + block - 1) / block;
  const std::int64_t tile_count = tiles.count();
  runtime::parallel_tasks(blocks * tile_count, [&](std::int64_t i) {
    // Tile-major within a row block: neighbouring tasks share the rows.
    const std::int64_t b = i / tile_count, tile = i % tile_count;
    const std::int64_t first = b * block;
    task(first, std::min(block, rows - first), tile);
  });
}

}  // namespace rapidqa::model
