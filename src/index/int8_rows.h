// Int8Rows: stored vectors as int8 codes in the layout the scan kernels
// read, so that an exact search moves a quarter of the bytes of a float
// scan and scores sixteen stored vectors per instruction, without a
// horizontal add per vector.
//
// Each row keeps d signed bytes (symmetric, max-abs per row: code =
// round(v / scale), scale = max|v| / 127), its scale and the sum of its
// codes. Rows are grouped in blocks of 16; inside a block the bytes are
// interleaved four dimensions at a time (64 bytes: dimensions 4g..4g+3 of
// rows 0..15), which is what one AVX-512 VNNI vpdpbusd, or an AVX2
// vpmaddubsw pair, multiplies against four broadcast query bytes.
//
// A query is quantized once per search to unsigned bytes with an offset
// (u = round(q / qscale) + offset); the kernel's integer dot then needs only
// the stored code sum to undo the offset:
//     sum (u_j - offset) c_j = sum u_j c_j - offset * sum c_j.
// Scores are approximate (within about 1% of the float inner product);
// callers re-rank the best few with the float vectors (SimdFlatIP does).
//
// Kernels: AVX-512 VNNI (8-bit queries), AVX2 (7-bit queries, so that
// vpmaddubsw's 16-bit pair sums cannot saturate) and portable C++, chosen
// once per process from what the CPU reports (__builtin_cpu_supports),
// capped by RAPIDQA_SCAN_KERNEL=avx512|avx2|portable or by
// ONEDNN_MAX_CPU_ISA naming an ISA below AVX-512, so the one variable the
// model runtime honours pins these kernels too.
//
// Thread safety: const members may run concurrently; append and clear need
// exclusive access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rapidqa::index {

enum class ScanKernel { kPortable, kAvx2, kAvx512Vnni };

// The kernel scans use in this process, and its name ("avx512-vnni",
// "avx2", "portable").
ScanKernel scan_kernel();
const char* scan_kernel_name(ScanKernel kernel);
// What this CPU can run at most (ignores the environment caps).
ScanKernel best_scan_kernel_for_cpu();
// Test and benchmark seam: later scans in this process use `kernel`
// (clamped to what the CPU can run). Not for use while searches run.
void set_scan_kernel(ScanKernel kernel);

// One query quantized for a kernel: d bytes padded with the offset (0 once
// centred) to whole 64-byte loads.
struct QueryCode {
  std::vector<std::uint8_t> bytes;
  float scale = 0;       // q ~ scale * (bytes - offset)
  std::int32_t offset = 0;
};
QueryCode quantize_query(const float* query, std::size_t d, ScanKernel kernel);

// One vector as int8 codes, symmetric with its max |v|: codes[j] =
// round(v[j] / scale), scale = max |v| / 127 (1 for a zero vector;
// non-finite values code as 0). Returns the scale.
float quantize_row(const float* vector, std::size_t d, std::int8_t* codes);

class Int8Rows {
 public:
  static constexpr std::size_t kBlockRows = 16;
  // Queries one pass scores together: the block's bytes are loaded once
  // for all of them.
  static constexpr std::size_t kMaxQueries = 4;

  explicit Int8Rows(std::size_t dimension);

  void append(std::size_t n, const float* vectors);
  void clear();

  std::size_t rows() const { return rows_; }
  std::size_t blocks() const { return (rows_ + kBlockRows - 1) / kBlockRows; }
  std::size_t dimension() const { return dimension_; }
  std::size_t memory_bytes() const;

  // Approximate inner products of nq (1..kMaxQueries) queries with the
  // rows of blocks [first_block, first_block + block_count): row r's score
  // for query q lands in scores[q * stride + (r - first_block * 16)]. Rows
  // past rows() in the last block score 0. Every query must be quantized
  // for `kernel`.
  void score(const QueryCode* const* queries, std::size_t nq, std::size_t first_block, std::size_t block_count,
             float* scores, std::size_t stride, ScanKernel kernel) const;

  // The integer dot product sum (u_j - offset) c_j of one query with one
  // row, computed plainly: the reference the kernels are tested against.
  std::int64_t reference_dot(const QueryCode& query, std::size_t row) const;
  // A row's code scale: its approximate score is
  // reference_dot * row_scale * query.scale.
  float row_scale(std::size_t row) const { return scales_[row]; }

 private:
  // Dimensions rounded up to a multiple of 4, and bytes per block.
  std::size_t padded_dimension() const { return (dimension_ + 3) / 4 * 4; }
  std::size_t block_bytes() const { return padded_dimension() * kBlockRows; }
  std::int8_t code_at(std::size_t row, std::size_t j) const;

  struct alignas(64) Line {
    std::int8_t bytes[64];
  };

  std::size_t dimension_;
  std::size_t rows_ = 0;
  std::vector<Line> lines_;            // blocks() * padded_dimension() / 4 lines
  std::vector<float> scales_;          // per row, padded to whole blocks with 0
  std::vector<std::int32_t> code_sums_;
};

}  // namespace rapidqa::index
