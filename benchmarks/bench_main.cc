// Google Benchmark main for the single bigset benchmark binary.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
