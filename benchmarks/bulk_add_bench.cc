// The bigset tool's bulk add (tools/bigset/bulk_add.h): a small input into
// a large set must cost what the input costs, not what the set holds.
//
//   BM_BulkAdd/lines:1000/set:1000000/planned: 1,000 new random elements,
//     one batch, into a set of a million, through BulkAdd (which seeks each
//     element's dots: the input is small against the set).
//   BM_BulkAdd/lines:1000/set:1000000/filter_first: the same, reading the
//     whole set into the filter first (what the tool did before BulkAdd).
//   BM_BulkAdd/lines:1000/set:1000/planned: the same into a set of 1,000.
//   BM_BulkAddCost/{absent,present}_seek, /absent_no_seek: batches of
//     1,000 adds into the million-element set, of elements it lacks or
//     holds, with the seek that finds their dots, or without it.
//   BM_BulkAddCost/scan: one streaming read of that set into a filter;
//     bytes_per_second counts Store::ApproximateSize bytes. A seek's time
//     (seek minus no seek, per element) times this rate gives the bytes a
//     seek costs (BulkAdd::kScanBytesPerSeek).
//

#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench_util.h"
#include "bigset/keys/keys.h"
#include "bulk_add.h"
#include "element_filter.h"

namespace bigset::bench {
namespace {

using tool::BulkAdd;

// A set of `n` random elements, compacted (ApproximateSize sees it all).
BigsetDb& LargeSet(uint64_t n) {
  static std::map<uint64_t, std::unique_ptr<BigsetDb>> cache;
  std::unique_ptr<BigsetDb>& db = cache[n];
  if (db == nullptr) {
    db = MakeBigset(n, /*keep_elements=*/n <= 1000000);
    Check(db->store->CompactRange(KeyspaceRange(0)));
  }
  return *db;
}

uint64_t SetBytes(BigsetDb& db) {
  absl::StatusOr<uint64_t> bytes =
      db.store->ApproximateSize(ElementsRange(0, kSet));
  Check(bytes.status());
  return *bytes;
}

void BulkAddLines(benchmark::State& state, uint64_t set_size,
                  bool filter_first) {
  // The million-element set grows by 1,000 per iteration (a few percent in
  // a run); the small one is made again for each.
  const bool fresh = set_size < 1000000;
  Rng rng(NextRunSeed());
  uint64_t added = 0;
  bool filtered = false;
  std::unique_ptr<BigsetDb> small;
  if (!fresh) LargeSet(set_size);  // Made before the timing.
  for (auto _ : state) {
    if (fresh) {
      state.PauseTiming();
      small.reset();
      small = MakeBigset(set_size, /*keep_elements=*/false);
      Check(small->store->CompactRange(KeyspaceRange(0)));
      state.ResumeTiming();
    }
    BigsetDb& db = fresh ? *small : LargeSet(set_size);
    // What the tool does per run: estimate, then add in one batch.
    BulkAdd adds(*db.replica, kSet, filter_first ? 0 : SetBytes(db));
    std::vector<std::string> lines;
    for (int i = 0; i < 1000; ++i) lines.push_back(RandomElement(rng));
    uint64_t changed = 0;
    Check(adds.Add(lines, &changed));
    added += changed;
    filtered = adds.filtering();
  }
  state.SetItemsProcessed(static_cast<int64_t>(added));
  state.counters["filter"] = filtered ? 1 : 0;
}

// Batches of 1,000 adds into the million-element set: of elements it lacks
// or holds, with the seek that finds their dots, or of elements it lacks
// without (what the filter allows). The seek's cost is the difference.
enum class Adds { kAbsentSeek, kPresentSeek, kAbsentNoSeek };

void AddCost(benchmark::State& state, Adds kind) {
  BigsetDb& db = LargeSet(1000000);
  Rng rng(3 + static_cast<int>(kind));
  for (auto _ : state) {
    std::vector<UpdateOp> ops;
    for (int i = 0; i < 1000; ++i) {
      ops.push_back(UpdateOp::Add(kind == Adds::kPresentSeek
                                      ? db.elements[rng() % db.elements.size()]
                                      : RandomElement(rng)));
      ops.back().context_from_replica = kind != Adds::kAbsentNoSeek;
    }
    Check(db.replica->Update(kSet, ops).status());
  }
  state.SetItemsProcessed(state.iterations() * 1000);
}

void ScanCost(benchmark::State& state) {
  BigsetDb& db = LargeSet(1000000);
  const uint64_t bytes = SetBytes(db);
  uint64_t elements = 0;
  for (auto _ : state) {
    tool::ElementFilter filter;
    auto reader = db.replica->Read(kSet);
    Check(reader.status());
    std::vector<ElementDots> chunk;
    for (bool more = true; more;) {
      absl::StatusOr<bool> next = (*reader)->Next(&chunk);
      Check(next.status());
      more = *next;
      for (const ElementDots& e : chunk) filter.Insert(e.element);
      elements += chunk.size();
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes * state.iterations()));
  state.SetItemsProcessed(static_cast<int64_t>(elements));
}

// Names are exact: docs/BENCHMARKS.md reads the figures by these names.
const int kBulkAddRegistered = [] {
  benchmark::RegisterBenchmark("BM_BulkAdd/lines:1000/set:1000000/planned",
                               BulkAddLines, 1000000, false)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_BulkAdd/lines:1000/set:1000000/filter_first",
                               BulkAddLines, 1000000, true)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_BulkAdd/lines:1000/set:1000/planned",
                               BulkAddLines, 1000, false)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_BulkAddCost/absent_seek", AddCost,
                               Adds::kAbsentSeek)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_BulkAddCost/present_seek", AddCost,
                               Adds::kPresentSeek)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_BulkAddCost/absent_no_seek", AddCost,
                               Adds::kAbsentNoSeek)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_BulkAddCost/scan", ScanCost)
      ->Unit(benchmark::kMillisecond);
  return 0;
}();

}  // namespace
}  // namespace bigset::bench
