// What the runtime's kernels may use on this CPU: the instructions the CPU
// reports, limited by ONEDNN_MAX_CPU_ISA, so that one variable pins oneDNN
// and every kernel of our own to the same path (the tests force the AVX2
// path with it). Read once per process.
//
// Thread safety: cpu_features() is safe from any thread.
#pragma once

namespace rapidqa::model {

struct CpuFeatures {
  bool avx2 = false;         // AVX2 and FMA
  bool avx512 = false;       // AVX-512 F, BW, DQ and VL (oneDNN's avx512_core)
  bool avx512_vnni = false;  // AVX-512 VNNI (vpdpbusd on zmm)
  bool int8_vnni = false;    // any VNNI, AVX2 or AVX-512: u8 x s8 without 16-bit saturation
  bool bf16 = false;         // AVX512-BF16 or AMX-BF16
};

const CpuFeatures& cpu_features();

}  // namespace rapidqa::model
