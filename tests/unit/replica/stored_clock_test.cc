// The stored layout of clocks: a header key and per-(actor, window) segment
// keys, written incrementally (only what a change touched), read back with
// one scan. Random shapes against the clock in memory, the size of what a
// write puts, and corrupt layouts.

#include "replica/stored_clock.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/replica/replica.h"
#include "core/clock_storage.h"
#include "core/cloud_codec.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
constexpr KeyspaceId kKs = 3;

// Counters from a few regions: small, around window boundaries, high, and
// at the very top of the range.
uint64_t Counter(Rng& rng) {
  switch (Uniform(rng, 0, 4)) {
    case 0:
      return Uniform(rng, 1, 300);
    case 1:
      return 4096 * Uniform(rng, 1, 6) + Uniform(rng, 0, 40) - 20;
    case 2:
      return (uint64_t{1} << 40) + Uniform(rng, 0, 20000);
    case 3:
      return kMax - Uniform(rng, 0, 9000);
    default:
      return Uniform(rng, 1, 100000);
  }
}

// The keys of the clock's range, as windows per actor (and whether there
// is a header).
StoredClock KeysOnDisk(Store& store, StateKind kind, bool* header) {
  StoredClock on_disk;
  *header = false;
  auto it = store.NewIterator(ReadOptions(), SetStateRange(kKs, "s", kind));
  ParsedKey key;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    REQUIRE(DecodeKey(it->key(), &key).ok());
    if (key.segment) {
      on_disk.windows[key.dot.actor].insert(key.dot.counter);
    } else {
      *header = true;
    }
  }
  return on_disk;
}

TEST_CASE(
    "stored clock: load(store(clock)) equals the clock after many "
    "partial rewrites") {
  for (uint64_t seed : Seeds(30)) {
    CAPTURE(seed);
    Rng rng(seed);
    MemStore mem;
    const std::vector<ActorId> actors = {3, 77, 0x8000000000000000ull, kMax};
    Clock clock;
    StoredClock stored;
    for (int step = 0; step < 400; ++step) {
      CAPTURE(step);
      ClockChanges changes;
      const ActorId a = actors[Uniform(rng, 0, actors.size() - 1)];
      const uint64_t dice = Uniform(rng, 0, 99);
      if (dice < 55) {
        // Scattered dots.
        for (int i = 0, n = Uniform(rng, 1, 40); i < n; ++i) {
          const Dot d{a, Counter(rng)};
          clock.AddDot(d);
          changes.Touch(d.actor, d.counter);
        }
      } else if (dice < 65) {
        // A dense patch (turns windows into bitmaps), or a long run.
        const uint64_t lo = Counter(rng);
        const uint64_t len = Uniform(rng, 0, 1) ? 3000 : Uniform(rng, 1, 20000);
        const uint64_t step_by = Uniform(rng, 1, 3);
        for (uint64_t k = 0; k < len && lo <= kMax - k; k += step_by) {
          clock.AddDot(Dot{a, lo + k});
          changes.Touch(a, lo + k);
        }
      } else if (dice < 75) {
        auto d = clock.Increment(a);
        if (d.ok()) changes.Touch(a, d->counter);
      } else if (dice < 85) {
        // A merge, as a clear or a hand-off does.
        Clock other;
        for (int i = 0, n = Uniform(rng, 1, 60); i < n; ++i) {
          other.AddDot(
              Dot{actors[Uniform(rng, 0, actors.size() - 1)], Counter(rng)});
        }
        clock.Merge(other);
        changes.TouchClock(other);
      } else if (dice < 95) {
        // A subtraction, as the sweeper does to a tombstone.
        Clock other;
        auto dots_of = [&](ActorId actor) {
          std::vector<Dot> out;
          clock.ForEachInterval([&](ActorId x, uint64_t lo, uint64_t hi) {
            if (x == actor && out.size() < 200) {
              for (uint64_t c = lo; out.size() < 200; ++c) {
                if (Uniform(rng, 0, 2) == 0) out.push_back(Dot{x, c});
                if (c == hi) break;
              }
            }
          });
          return out;
        };
        for (Dot d : dots_of(a)) other.AddDot(d);
        clock.Subtract(other);
        changes.TouchClock(other);
      } else {
        continue;  // No change.
      }
      WriteBatch batch;
      WriteClock(kKs, "s", StateKind::kTombstone, clock, changes, &stored,
                 &batch);
      REQUIRE(mem.store->Write(WriteOptions(), batch).ok());
      // The header kept in memory is the clock's (an insert's fast path
      // rebuilds it in place).
      REQUIRE(stored.header == clock_storage::HeaderOf(clock));
      if (step % 20 == 0 || step == 399) {
        Clock loaded;
        StoredClock read_back;
        bool found = false;
        REQUIRE(ReadClock(mem.store.get(), ReadOptions(), kKs, "s",
                          StateKind::kTombstone, &loaded, &read_back, &found)
                    .ok());
        CHECK(found == !clock.empty());
        REQUIRE(loaded == clock);
        CHECK(read_back.windows == stored.windows);
        CHECK(read_back.header == stored.header);
        // Nothing stale is left on disk.
        bool header = false;
        StoredClock on_disk =
            KeysOnDisk(*mem.store, StateKind::kTombstone, &header);
        CHECK(on_disk.windows == stored.windows);
        CHECK(header == !clock.empty());
      }
    }
  }
}

TEST_CASE(
    "stored clock: what a write puts follows what changed, not the "
    "cloud") {
  MemStore mem;
  // 100,000 scattered dots of another actor.
  Clock clock;
  Rng rng(5);
  std::vector<uint64_t> counters;
  for (uint64_t c = 2; c <= 200000; c += 2) counters.push_back(c);
  std::shuffle(counters.begin(), counters.end(), rng);
  for (uint64_t c : counters) clock.AddDot(Dot{0xb, c});
  (void)clock.Increment(0xa);
  StoredClock stored;
  ClockChanges all;
  all.TouchClock(clock);
  WriteBatch first;
  WriteClock(kKs, "s", StateKind::kClock, clock, all, &stored, &first);
  CHECK(first.ApproximateSize() > 20000);  // The whole cloud, once.
  REQUIRE(mem.store->Write(WriteOptions(), first).ok());

  // This replica's own insert: the header only.
  ClockChanges own;
  auto d = clock.Increment(0xa);
  REQUIRE(d.ok());
  own.Touch(0xa, d->counter);
  WriteBatch insert;
  WriteClock(kKs, "s", StateKind::kClock, clock, own, &stored, &insert);
  CHECK(insert.Count() == 1);
  CHECK(insert.ApproximateSize() < 64);

  // A new scattered dot of the other actor: one segment (a window's
  // bitmap at most) and no header.
  ClockChanges scattered;
  clock.AddDot(Dot{0xb, 100001});
  scattered.Touch(0xb, 100001);
  WriteBatch apply;
  WriteClock(kKs, "s", StateKind::kClock, clock, scattered, &stored, &apply);
  CHECK(apply.Count() == 1);
  CHECK(apply.ApproximateSize() < 700);
  REQUIRE(mem.store->Write(WriteOptions(), insert).ok());
  REQUIRE(mem.store->Write(WriteOptions(), apply).ok());
  Clock loaded;
  StoredClock read_back;
  bool found = false;
  REQUIRE(ReadClock(mem.store.get(), ReadOptions(), kKs, "s", StateKind::kClock,
                    &loaded, &read_back, &found)
              .ok());
  CHECK(loaded == clock);

  // Filling every gap absorbs the cloud into the base: the segments go.
  ClockChanges fill;
  for (uint64_t c = 1; c <= 200001; c += 2) {
    clock.AddDot(Dot{0xb, c});
    fill.Touch(0xb, c);
  }
  REQUIRE(clock.cloud().Find(0xb) == nullptr);
  WriteBatch absorb;
  WriteClock(kKs, "s", StateKind::kClock, clock, fill, &stored, &absorb);
  REQUIRE(mem.store->Write(WriteOptions(), absorb).ok());
  CHECK(stored.windows.empty());
  bool header = false;
  CHECK(KeysOnDisk(*mem.store, StateKind::kClock, &header).windows.empty());
  CHECK(header);
}

TEST_CASE("stored clock: HeaderMatches agrees with comparing HeaderOf") {
  for (uint64_t seed : Seeds(20)) {
    CAPTURE(seed);
    Rng rng(seed);
    Clock clock;
    std::vector<clock_storage::HeaderEntry> reused;
    for (int step = 0; step < 200; ++step) {
      CAPTURE(step);
      const ActorId a = Uniform(rng, 1, 6);
      if (Uniform(rng, 0, 1)) {
        // Fails only at the top of the counter space (nothing changes).
        (void)clock.Increment(a);
      } else {
        clock.AddDot(Dot{a, Counter(rng)});
      }
      const std::vector<clock_storage::HeaderEntry> header =
          clock_storage::HeaderOf(clock);
      clock_storage::HeaderOfInto(clock, &reused);
      REQUIRE(reused == header);
      REQUIRE(clock_storage::HeaderMatches(clock, header));
      // Any change of the entries is seen: a base, a missing entry, an
      // extra one.
      std::vector<clock_storage::HeaderEntry> other = header;
      const size_t i = Uniform(rng, 0, other.size() - 1);
      other[i].base ^= 1;
      CHECK_FALSE(clock_storage::HeaderMatches(clock, other));
      other = header;
      other.erase(other.begin() + static_cast<std::ptrdiff_t>(i));
      CHECK_FALSE(clock_storage::HeaderMatches(clock, other));
      other = header;
      other.push_back({kMax, 1});
      CHECK_FALSE(clock_storage::HeaderMatches(clock, other));
    }
  }
  CHECK(clock_storage::HeaderMatches(Clock(), {}));
}

TEST_CASE("stored clock: inconsistent keys are corruption") {
  Clock clock;
  for (uint64_t c = 10; c < 9000; c += 3) clock.AddDot(Dot{5, c});
  (void)clock.Increment(6);
  std::string header, segment;
  clock_storage::EncodeHeader(clock_storage::HeaderOf(clock), &header);
  REQUIRE(clock_storage::EncodeSegment(*clock.cloud().Find(5), 4096, &segment));
  auto load = [&](const std::vector<std::pair<std::string, std::string>>& kvs) {
    MemStore mem;
    WriteBatch b;
    for (const auto& [k, v] : kvs) b.Put(k, v);
    REQUIRE(mem.store->Write(WriteOptions(), b).ok());
    Clock c;
    StoredClock st;
    bool found = false;
    return ReadClock(mem.store.get(), ReadOptions(), kKs, "s",
                     StateKind::kClock, &c, &st, &found);
  };
  const std::string hk = SetClockKey(kKs, "s");
  auto seg = [](ActorId a, uint64_t w) {
    return SetStateSegmentKey(kKs, "s", StateKind::kClock, a, w);
  };
  // Well-formed (two windows' worth written for the check's sake).
  std::string w0;
  REQUIRE(clock_storage::EncodeSegment(*clock.cloud().Find(5), 0, &w0));
  std::string w2;
  REQUIRE(clock_storage::EncodeSegment(*clock.cloud().Find(5), 8192, &w2));
  CHECK(load({{hk, header},
              {seg(5, 0), w0},
              {seg(5, 4096), segment},
              {seg(5, 8192), w2}})
            .ok());
  // A segment without a header.
  CHECK(load({{seg(5, 4096), segment}}).code() == absl::StatusCode::kDataLoss);
  // A segment of an actor the header does not list.
  CHECK(load({{hk, header}, {seg(9, 4096), segment}}).code() ==
        absl::StatusCode::kDataLoss);
  // Overlapping segments: the same intervals under two windows.
  CHECK(load({{hk, header}, {seg(5, 0), segment}, {seg(5, 4096), segment}})
            .code() == absl::StatusCode::kDataLoss);
  // An interval that starts outside its window.
  std::string outside;
  const cloud_codec::Run far[] = {{8192 + 5000, 8192 + 5000}};
  cloud_codec::EncodeRuns(far, 8192, &outside);
  CHECK(load({{hk, header}, {seg(5, 8192), outside}}).code() ==
        absl::StatusCode::kDataLoss);
  // An unaligned window.
  CHECK(load({{hk, header}, {seg(5, 100), segment}}).code() ==
        absl::StatusCode::kDataLoss);
  // Undecodable values.
  CHECK(load({{hk, "\x05garbage"}}).code() == absl::StatusCode::kDataLoss);
  CHECK(load({{hk, header}, {seg(5, 4096), "\x01\xff"}}).code() ==
        absl::StatusCode::kDataLoss);
  // A header actor with no dot at all.
  std::string bad_header;
  clock_storage::EncodeHeader({{5, 0}, {6, 1}, {7, 0}}, &bad_header);
  CHECK(load({{hk, bad_header}, {seg(5, 4096), segment}}).code() ==
        absl::StatusCode::kDataLoss);
  // Every truncation of a segment is rejected or reads fine, never a crash.
  for (size_t n = 0; n < segment.size(); ++n) {
    (void)load({{hk, header}, {seg(5, 4096), segment.substr(0, n)}});
  }
}

TEST_CASE("stored clock: a store in the previous key format is refused") {
  MemStore mem;
  // A key of format version 1 in keyspace 4.
  std::string v1 = MetadataKey(4, "actor");
  v1[1] = 0x01;
  WriteBatch b;
  b.Put(v1, "whatever");
  REQUIRE(mem.store->Write(WriteOptions(), b).ok());
  ReplicaOptions o;
  o.keyspace = 4;
  auto r = Replica::Open(mem.store.get(), o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(r.status().message()).find("version 1") !=
        std::string::npos);
  // Other keyspaces are not concerned.
  o.keyspace = 5;
  CHECK(Replica::Open(mem.store.get(), o).ok());
}

TEST_CASE("stored clock: Verify reports a broken layout") {
  MemStore mem;
  ReplicaOptions o;
  o.keyspace = kKs;
  auto r = Replica::Open(mem.store.get(), o);
  REQUIRE(r.ok());
  // A set with a cloud: scattered dots of another actor.
  Delta d;
  d.set =
      std::string("s");  // GCC 12 -Wrestrict false positive on literal assign.
  for (uint64_t c = 3; c < 3000; c += 7) {
    d.ops.push_back(DeltaOp{absl::StrCat("e", c), {}, Dot{0xf, c}});
  }
  REQUIRE((*r)->Apply(d).ok());
  auto clean = (*r)->Verify();
  REQUIRE(clean.ok());
  CHECK(clean->ok());
  // A stray segment of an actor the header does not list.
  WriteBatch b;
  b.Put(SetStateSegmentKey(kKs, "s", StateKind::kClock, 0xdead, 0), "\x02");
  REQUIRE(mem.store->Write(WriteOptions(), b).ok());
  auto report = (*r)->Verify();
  REQUIRE(report.ok());
  CHECK_FALSE(report->ok());
  REQUIRE(!report->problems.empty());
  CHECK(report->problems[0].find("set-clock") != std::string::npos);
}

}  // namespace
}  // namespace bigset::testing
