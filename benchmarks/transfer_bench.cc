// BM_SetTransfer/replica/1000000: elements per second to transfer a
// 1,000,000-element set from one replica to a new one, in process (the
// sender's Read chunks applied with ApplyTransferChunk, then
// FinishTransfer). The replica-level part of a hand-off, with no network;
// compare with BM_FullRead/bigset/1000000 (scripts/bench_ratios.py).

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "bench_util.h"
#include "bigset/replica/replica.h"

namespace bigset::bench {
namespace {

constexpr uint64_t kTransferSize = 1'000'000;

void SetTransfer(benchmark::State& state) {
  static BigsetDb* sender = [] {
    auto db = MakeBigset(kTransferSize, false);
    db->store->db()->CompactRange(nullptr, nullptr);
    return db.release();
  }();
  uint64_t elements = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<BigsetDb> receiver = OpenBigset();
    state.ResumeTiming();
    auto reader = sender->replica->Read(kSet);
    Check(reader.status());
    Clock tracker;
    std::vector<ElementDots> chunk;
    bool more = true;
    while (more) {
      auto next = (*reader)->Next(&chunk);
      Check(next.status());
      more = *next;
      Check(receiver->replica->ApplyTransferChunk(kSet, chunk, &tracker));
      elements += chunk.size();
    }
    Check(receiver->replica->FinishTransfer(kSet, (*reader)->clock(), tracker));
    state.PauseTiming();
    receiver.reset();
    state.ResumeTiming();
  }
  if (elements != kTransferSize * state.iterations()) std::abort();
  state.SetItemsProcessed(static_cast<int64_t>(elements));
}

[[maybe_unused]] const int kTransferRegistered = [] {
  benchmark::RegisterBenchmark("BM_SetTransfer/replica/1000000", SetTransfer)
      ->Unit(benchmark::kMillisecond);
  return 0;
}();

}  // namespace
}  // namespace bigset::bench
