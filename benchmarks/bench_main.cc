// Google Benchmark main for the single bigset benchmark binary. Databases
// shared between benchmarks live until the process ends (they are never
// destroyed), so their directories are removed here, after the run.
#include <benchmark/benchmark.h>

#include "bench_util.h"

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  bigset::bench::RemoveProcessDirs();
  return 0;
}
