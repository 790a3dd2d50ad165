// Key codec and comparator costs. The comparator is measured against
// LevelDB's bytewise comparator on the same element keys (the baseline).

#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "bigset/keys/comparator.h"
#include "bigset/keys/keys.h"
#include "leveldb/comparator.h"
#include "leveldb/slice.h"

namespace bigset {
namespace {

// Pairs of element keys of one set, 16-byte random elements, in random
// order: what LevelDB compares in memtables and during binary search.
std::vector<std::string> ElementKeys(size_t n) {
  std::mt19937_64 rng(42);
  std::vector<std::string> keys;
  keys.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string element(16, '\0');
    for (char& c : element) c = static_cast<char>(rng());
    keys.push_back(ElementKey(7, "benchmark-set", element,
                              Dot{rng(), rng() % 1000000 + 1}));
  }
  return keys;
}

void RunCompare(benchmark::State& state, const leveldb::Comparator* cmp) {
  const std::vector<std::string> keys = ElementKeys(4096);
  size_t i = 0;
  int sink = 0;
  for (auto _ : state) {
    const std::string& a = keys[i & 4095];
    const std::string& b = keys[(i * 7 + 1) & 4095];
    sink += cmp->Compare(leveldb::Slice(a), leveldb::Slice(b));
    ++i;
  }
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}

void BM_Compare_Bigset(benchmark::State& state) {
  RunCompare(state, BigsetComparator());
}
BENCHMARK(BM_Compare_Bigset)->Name("BM_Compare/bigset");

void BM_Compare_Bytewise(benchmark::State& state) {
  RunCompare(state, leveldb::BytewiseComparator());
}
BENCHMARK(BM_Compare_Bytewise)->Name("BM_Compare/bytewise");

// Sorting whole key vectors: the comparator inside a realistic access pattern.
void RunSort(benchmark::State& state, const leveldb::Comparator* cmp) {
  const std::vector<std::string> keys = ElementKeys(10000);
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<leveldb::Slice> slices(keys.begin(), keys.end());
    state.ResumeTiming();
    std::sort(slices.begin(), slices.end(),
              [cmp](const leveldb::Slice& a, const leveldb::Slice& b) {
                return cmp->Compare(a, b) < 0;
              });
    benchmark::DoNotOptimize(slices.data());
  }
  state.SetItemsProcessed(state.iterations() * keys.size());
}

void BM_SortKeys_Bigset(benchmark::State& state) {
  RunSort(state, BigsetComparator());
}
BENCHMARK(BM_SortKeys_Bigset)->Name("BM_SortKeys/bigset/10000");

void BM_SortKeys_Bytewise(benchmark::State& state) {
  RunSort(state, leveldb::BytewiseComparator());
}
BENCHMARK(BM_SortKeys_Bytewise)->Name("BM_SortKeys/bytewise/10000");

void BM_KeyDecode_Element(benchmark::State& state) {
  const std::vector<std::string> keys = ElementKeys(4096);
  size_t i = 0;
  ParsedKey p;
  for (auto _ : state) {
    benchmark::DoNotOptimize(DecodeKey(keys[i++ & 4095], &p).ok());
    benchmark::DoNotOptimize(p.dot.counter);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_KeyDecode_Element)->Name("BM_KeyDecode/element");

void BM_KeyDecode_ElementWithNul(benchmark::State& state) {
  // Elements containing NUL bytes take the unescaping (copying) path.
  std::string element("ab\0cd\0ef\0gh\0ijkl", 16);
  std::string key = ElementKey(7, "benchmark-set", element, Dot{1, 2});
  ParsedKey p;
  for (auto _ : state) {
    benchmark::DoNotOptimize(DecodeKey(key, &p).ok());
    benchmark::DoNotOptimize(p.element.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_KeyDecode_ElementWithNul)->Name("BM_KeyDecode/element_with_nul");

void BM_KeyEncode_Element(benchmark::State& state) {
  std::string element(16, 'x');
  std::string key;
  uint64_t counter = 0;
  for (auto _ : state) {
    key.clear();
    AppendElementKey(&key, 7, "benchmark-set", element, Dot{1, ++counter});
    benchmark::DoNotOptimize(key.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_KeyEncode_Element)->Name("BM_KeyEncode/element");

}  // namespace
}  // namespace bigset
