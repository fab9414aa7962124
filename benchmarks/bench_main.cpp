// rapidqa-bench entry point: Google Benchmark's main, with rapidqa's build
// and thread configuration added to the context block of every report, so
// a results file says what it measured.
#include <benchmark/benchmark.h>

#include "rapidqa/compute_runtime.h"

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // The engine's defaults: one FAISS thread per single-query search.
  if (auto s = rapidqa::configure_compute_threads({}); !s.is_ok()) {
    benchmark::AddCustomContext("rapidqa_threads_error", s.to_string());
  }
  benchmark::AddCustomContext("rapidqa", rapidqa::build_info());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
