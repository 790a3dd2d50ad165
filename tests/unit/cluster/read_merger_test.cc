// The R-way read merge: replicas with random states (deltas delivered to
// random subsets, so random dots are missing or removed at random replicas)
// are streamed in random chunk sizes and merged. The merge equals the model
// of every delta any of them saw, and each replica, after its repairs,
// equals the merge.

#include "cluster/read_merger.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/replica/replica.h"
#include "bigset/store/leveldb_store.h"
#include "leveldb/env.h"
#include "leveldb/helpers/memenv.h"
#include "orswot_model.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

TEST_CASE("read merge: random replica states merge to the model and repair") {
  for (uint64_t seed : Seeds(30)) {
    CAPTURE(seed);
    Rng rng(seed);
    testing::MemStore mem;
    const int n = 3;
    std::vector<std::unique_ptr<Replica>> replicas;
    for (int i = 0; i < n; ++i) {
      ReplicaOptions ro;
      ro.keyspace = static_cast<KeyspaceId>(i);
      auto r = Replica::Open(mem.store.get(), ro);
      REQUIRE(r.ok());
      replicas.push_back(std::move(*r));
    }
    const std::string set = "s";
    std::vector<Delta> deltas;
    std::vector<std::set<size_t>> seen(n);
    std::vector<std::string> universe;
    for (int i = 0; i < 40; ++i) universe.push_back(absl::StrCat("e", i));
    // Random history: each op on a random replica, its delta delivered to a
    // random subset of the others.
    for (int step = 0; step < 300; ++step) {
      int r = static_cast<int>(Uniform(rng, 0, n - 1));
      const std::string& e = universe[Uniform(rng, 0, universe.size() - 1)];
      auto dots = replicas[r]->Contains(set, e);
      REQUIRE(dots.ok());
      UpdateOp op =
          Uniform(rng, 0, 2) == 0
              ? UpdateOp::Remove(e, *dots)
              : UpdateOp::Add(e,
                              Uniform(rng, 0, 1) ? *dots : std::vector<Dot>{});
      auto d = replicas[r]->Update(set, std::span(&op, 1));
      REQUIRE(d.ok());
      size_t id = deltas.size();
      deltas.push_back(*d);
      seen[r].insert(id);
      for (int o = 0; o < n; ++o) {
        if (o != r && Uniform(rng, 0, 2) == 0) {
          REQUIRE(replicas[o]->Apply(*d).ok());
          seen[o].insert(id);
        }
      }
    }
    // Merge a random R-subset, streamed in random chunk sizes.
    const size_t R = Uniform(rng, 2, 3);
    std::vector<int> chosen = {0, 1, 2};
    std::shuffle(chosen.begin(), chosen.end(), rng);
    chosen.resize(R);
    std::vector<Clock> clocks(R);
    std::vector<std::vector<ElementDots>> states(R);
    for (size_t i = 0; i < R; ++i) {
      states[i] = ReadAll(*replicas[chosen[i]], set, 1000, &clocks[i]);
    }
    ReadMerger merger(clocks);
    std::vector<size_t> pos(R, 0);
    std::vector<ElementDots> merged;
    std::vector<std::vector<DeltaOp>> repairs(R);
    for (int guard = 0; !merger.Finished(); ++guard) {
      REQUIRE(guard < 10000);
      for (size_t i = 0; i < R; ++i) {
        if (!merger.NeedsMore(i)) continue;
        size_t take = Uniform(rng, 1, 7);
        std::vector<ElementDots> chunk;
        while (take-- > 0 && pos[i] < states[i].size()) {
          chunk.push_back(states[i][pos[i]++]);
        }
        merger.Push(i, std::move(chunk), pos[i] == states[i].size());
      }
      merger.Merge(&merged);
      for (size_t i = 0; i < R; ++i) {
        for (DeltaOp& op : merger.TakeRepairs(i)) {
          repairs[i].push_back(std::move(op));
        }
      }
    }
    // The merge is the model of everything the chosen replicas saw.
    OrswotModel model;
    std::set<size_t> all;
    for (int c : chosen) all.insert(seen[c].begin(), seen[c].end());
    for (size_t id : all) model.Absorb(deltas[id]);
    REQUIRE(ToModel(merged) == model.Value());
    for (size_t i = 1; i < merged.size(); ++i) {
      REQUIRE(merged[i - 1].element < merged[i].element);
    }
    // Each replica, repaired, equals the merge.
    for (size_t i = 0; i < R; ++i) {
      Delta repair;
      repair.set = set;
      repair.ops = repairs[i];
      REQUIRE(replicas[chosen[i]]->Apply(repair).ok());
      REQUIRE(ToModel(ReadAll(*replicas[chosen[i]], set)) == model.Value());
    }
  }
}

TEST_CASE("read merge: nothing is merged past a replica that is not done") {
  Clock a, b;
  a.AddDot(Dot{1, 1});
  a.AddDot(Dot{1, 2});
  b.AddDot(Dot{1, 1});
  ReadMerger merger({a, b});
  merger.Push(0, {{"x", {Dot{1, 1}}}, {"z", {Dot{1, 2}}}}, true);
  merger.Push(1, {{"x", {Dot{1, 1}}}}, false);
  std::vector<ElementDots> out;
  // b might still send "y": only "x" is safe.
  CHECK(merger.Merge(&out) == 1);
  CHECK(out.size() == 1);
  CHECK(merger.NeedsMore(1));
  merger.Push(1, {}, true);
  CHECK(merger.Merge(&out) == 1);
  REQUIRE(out.size() == 2);
  CHECK(out[1].element == "z");
  // b lacks z:2 and never saw it: a repair adds it to b.
  auto rb = merger.TakeRepairs(1);
  REQUIRE(rb.size() == 1);
  CHECK(rb[0].element == "z");
  CHECK(rb[0].add == Dot{1, 2});
  CHECK(merger.Finished());
}

// Regression: a read whose replica was replaced mid-stream returned the
// replacement's newer dots, which the read's context (given to the client
// before the replacement) had not seen, so a clear built from that context
// left them: the soak saw a dot come back after an acknowledged clear of
// it (seed 0x5eed0028 once quorum reads backed off their retransmissions).
TEST_CASE(
    "read merge: after a replacement the answer holds only dots the read's "
    "context has seen") {
  Clock a, b, c;
  a.AddDot(Dot{1, 1});
  b.AddDot(Dot{1, 1});
  c.AddDot(Dot{1, 1});
  c.AddDot(Dot{1, 2});  // Newer than the read: an add after it began.
  ReadMerger merger({a, b});
  merger.Push(0, {{"w", {Dot{1, 1}}}}, false);
  merger.Push(1, {{"w", {Dot{1, 1}}}}, false);
  std::vector<ElementDots> out;
  CHECK(merger.Merge(&out) == 1);
  REQUIRE(merger.last_merged() != nullptr);
  CHECK(*merger.last_merged() == "w");
  // Replica 1 is replaced by one that also holds x, added with dot 1:2.
  merger.Replace(1, c);
  merger.Push(0, {}, true);
  merger.Push(1, {{"x", {Dot{1, 2}}}}, true);
  merger.Merge(&out);
  // x:2 is newer than the context: not in the answer.
  REQUIRE(out.size() == 1);
  CHECK(out[0].element == "w");
  CHECK(merger.MergedClock().Seen(Dot{1, 1}));
  CHECK_FALSE(merger.MergedClock().Seen(Dot{1, 2}));
  // It is still repaired to the replica that lacks it.
  auto ra = merger.TakeRepairs(0);
  REQUIRE(ra.size() == 1);
  CHECK(ra[0].element == "x");
  CHECK(ra[0].add == Dot{1, 2});
  CHECK(merger.Finished());
}

}  // namespace
}  // namespace bigset::testing
