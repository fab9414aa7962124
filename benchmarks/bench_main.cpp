// rapidqa-bench entry point: Google Benchmark's main, with rapidqa's build
// and thread configuration added to the context block of every report, so
// a results file says what it measured.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>

#include "rapidqa/compute_runtime.h"

namespace {

void print_usage() {
  std::printf("usage: rapidqa-bench [Google Benchmark flags]\n"
              "  runs rapidqa's micro-benchmarks (one file per pipeline stage); e.g.\n"
              "  --benchmark_filter=BM_Linear --benchmark_format=json --benchmark_out=FILE\n\n");
  benchmark::PrintDefaultHelp();
}

}  // namespace

int main(int argc, char** argv) {
  // Answered here rather than by Google Benchmark, whose help does not say
  // what this program is.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      print_usage();
      return 0;
    }
  }
  benchmark::Initialize(&argc, argv, print_usage);
  // Whatever Google Benchmark did not take is a mistake; exit code 2 like
  // every other rapidqa tool's usage error (Google Benchmark's own is 1,
  // which reads as a failed run).
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  // The engine's defaults: one FAISS thread per single-query search.
  if (auto s = rapidqa::configure_compute_threads({}); !s.is_ok()) {
    benchmark::AddCustomContext("rapidqa_threads_error", s.to_string());
  }
  benchmark::AddCustomContext("rapidqa", rapidqa::build_info());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
