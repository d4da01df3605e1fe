// The benchmarks' main: the planner runs under the heap settings the CLI sets
// (planner/core/heap_reuse.h), then Google Benchmark's own.
#include <benchmark/benchmark.h>

#include "planner/core/heap_reuse.h"

int main(int argc, char** argv) {
  headroom::KeepFreedHeapForReuse();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
