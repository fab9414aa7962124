// The models library's share of the process-wide thread settings. The core
// (runtime/compute_runtime.cpp) calls these through weak references, so a
// build without LibTorch links and simply has nothing to configure.
#pragma once

#include <string>

namespace rapidqa::model {

// LibTorch's own OpenMP team runs single-threaded: the runtime's WorkPool
// splits every product into tasks and an idle spinning team would only take
// cores from it. Called by configure_compute_threads and on every model load.
void use_single_threaded_libraries();

// "LibTorch ..." and "oneDNN ..." lines for build_info().
std::string libraries_build_info();

}  // namespace rapidqa::model
