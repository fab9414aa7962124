#include "model/model_runtime.h"

#include <ATen/Parallel.h>
#include <oneapi/dnnl/dnnl.h>
#include <torch/version.h>

#include <fmt/format.h>

namespace rapidqa::model {

void use_single_threaded_libraries() {
  if (at::get_num_threads() != 1) at::set_num_threads(1);
}

std::string libraries_build_info() {
  const dnnl_version_t* dnnl = dnnl_version();
  std::string info = fmt::format("LibTorch  {}.{}.{} (its own intra-op threads {})\n", TORCH_VERSION_MAJOR,
                                 TORCH_VERSION_MINOR, TORCH_VERSION_PATCH, at::get_num_threads());
  info += fmt::format("oneDNN    {}.{}.{} (cpu runtime {})\n", dnnl->major, dnnl->minor, dnnl->patch,
                      dnnl->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other");
  return info;
}

}  // namespace rapidqa::model
