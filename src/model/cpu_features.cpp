#include "model/cpu_features.h"

#include <oneapi/dnnl/dnnl.hpp>

namespace rapidqa::model {
namespace {

CpuFeatures detect() {
  using dnnl::cpu_isa;
  CpuFeatures f;
  // AVX2 is what the element-wise kernels need at least; oneDNN's limit
  // below AVX2 does not remove it from them (as before this header).
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  switch (dnnl::get_effective_cpu_isa()) {
    case cpu_isa::avx512_core_amx:
    case cpu_isa::avx512_core_bf16:
      f.bf16 = true;
      [[fallthrough]];
    case cpu_isa::avx512_core_vnni:
      f.avx512_vnni = __builtin_cpu_supports("avx512vnni");
      f.int8_vnni = true;
      [[fallthrough]];
    case cpu_isa::avx512_core:
      f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
      break;
    case cpu_isa::avx2_vnni:
      f.int8_vnni = true;
      break;
    default:
      break;
  }
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace rapidqa::model
