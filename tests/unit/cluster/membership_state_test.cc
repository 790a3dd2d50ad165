// MembershipState (lib/cluster/membership.h): node-authored states merged
// by version, serving lists derived from them, places taken and handed on,
// persistence across reopen, the earlier format's conversion, and random
// merges in random orders converging to the same view.

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "bigset/keys/keys.h"
#include "cluster/membership.h"
#include "core/coding.h"
#include "core/crc32c.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

constexpr KeyspaceId kMeta = 0xFFFFFFFF;

Ring MakeRing(std::vector<NodeId> nodes, uint64_t epoch, uint32_t size = 16) {
  return testing::RendezvousRing(std::move(nodes), epoch, size, 3);
}

// A partition whose list in `ring` holds `in` and not `out`.
uint32_t PartitionWith(const Ring& ring, NodeId in, NodeId out) {
  for (uint32_t p = 0; p < ring.ring_size(); ++p) {
    if (Has(ring.PreferenceList(p), in) && !Has(ring.PreferenceList(p), out)) {
      return p;
    }
  }
  FAIL("no such partition");
  return 0;
}

TEST_CASE("membership: a new store serves what the ring gives it") {
  MemStore m;
  const Ring ring = MakeRing({1, 2, 3, 4, 5}, 1);
  MembershipState state(2, m.store.get());
  REQUIRE(state.Load(ring).ok());
  CHECK(state.own().version == 1);
  CHECK(state.PartitionsMoving() == 0);
  for (uint32_t p = 0; p < ring.ring_size(); ++p) {
    CHECK(state.ServingList(p) == ring.PreferenceList(p));
    CHECK(state.Serves(p) == Has(ring.PreferenceList(p), 2));
  }
  // A joiner opened with a ring it is not in serves nothing.
  MemStore m5;
  MembershipState joiner(6, m5.store.get());
  REQUIRE(joiner.Load(ring).ok());
  CHECK(joiner.own().entries.empty());
  CHECK(joiner.PartitionsMoving() == 0);
}

// Defect (lifecycle soak, history 1592620396): a joiner opened with a ring
// that left it out took each node that ring placed, of which it had no
// state, for a place of its own. That ring's list for a partition held a
// node that was then only receiving and later took another listed node's
// place: the joiner coordinated a write, those two acknowledged it, and it
// answered with the dot in one place of W = 2.
TEST_CASE(
    "membership: a joiner's guesses from its ring share one place until "
    "their states arrive") {
  const Ring ring = MakeRing({1, 2, 3, 4, 5}, 7);
  // An original member: each node its ring places is a place.
  MemStore m;
  MembershipState member(2, m.store.get());
  REQUIRE(member.Load(ring).ok());
  // A joiner (node 6, not in the ring it was opened with).
  MemStore m6;
  MembershipState joiner(6, m6.store.get());
  REQUIRE(joiner.Load(ring).ok());
  for (uint32_t p = 0; p < ring.ring_size(); ++p) {
    const std::vector<uint32_t>& places = member.ServingPlaces(p);
    REQUIRE(places.size() == 3);
    CHECK(places[0] != places[1]);
    CHECK(places[1] != places[2]);
    CHECK(places[0] != places[2]);
    // The joiner lists the same nodes (the guess), as one place.
    CHECK(joiner.ServingList(p) == ring.PreferenceList(p));
    const std::vector<uint32_t>& guessed = joiner.ServingPlaces(p);
    REQUIRE(guessed.size() == 3);
    CHECK(guessed[0] == guessed[1]);
    CHECK(guessed[1] == guessed[2]);
  }
  // Once it has a node's state, that node is a place of its own; the
  // nodes it still guesses share one.
  const uint32_t p = PartitionWith(ring, 1, 6);
  const std::vector<NodeId> list = ring.PreferenceList(p);
  const NodeId heard = list[0];
  bool raised = false;
  NodeServing st{heard, 5, {}};
  for (uint32_t q = 0; q < ring.ring_size(); ++q) {
    if (Has(ring.PreferenceList(q), heard)) {
      st.entries.push_back(ServeEntry{q, 5, 0, 0, 0, false});
    }
  }
  REQUIRE(joiner.Merge({st}, &raised));
  const std::vector<uint32_t>& places = joiner.ServingPlaces(p);
  REQUIRE(joiner.ServingList(p) == list);
  CHECK(places[0] != places[1]);
  CHECK(places[1] == places[2]);
}

TEST_CASE(
    "membership: higher versions win; a node stays the authority on "
    "itself") {
  MemStore m;
  const Ring ring = MakeRing({1, 2, 3, 4, 5}, 1);
  MembershipState state(1, m.store.get());
  REQUIRE(state.Load(ring).ok());
  const uint32_t p = PartitionWith(ring, 2, 1);
  // Node 2 says it serves nothing any more (version 3), then an older
  // state arrives late: ignored.
  bool raised = false;
  CHECK(state.Merge({NodeServing{2, 3, {}}}, &raised));
  CHECK_FALSE(Has(state.ServingList(p), 2));
  CHECK(state.Moving(p));
  NodeServing old{2, 2, {ServeEntry{p, 1, 0, 0, 0, false}}};
  CHECK_FALSE(state.Merge({old}, &raised));
  CHECK_FALSE(Has(state.ServingList(p), 2));
  // States naming partitions the ring does not have are ignored whole.
  NodeServing bad{3, 9, {ServeEntry{ring.ring_size(), 1, 0, 0, 0, false}}};
  CHECK_FALSE(state.Merge({bad}, &raised));
  CHECK(state.StateOf(3) == nullptr);
  // Others remember a later state of node 1 than it has (its store was
  // replaced): node 1 keeps its own content under a higher version.
  const NodeServing mine = state.own();
  NodeServing forged{1, 50, {}};
  CHECK_FALSE(state.Merge({forged}, &raised));
  CHECK(raised);
  CHECK(state.own().version == 51);
  CHECK(state.own().entries == mine.entries);
  // The same version with other content raises it too; an echo does not.
  raised = false;
  NodeServing echo = state.own();
  state.Merge({echo}, &raised);
  CHECK_FALSE(raised);
  echo.entries.clear();
  state.Merge({echo}, &raised);
  CHECK(raised);
  CHECK(state.own().version == 52);
}

TEST_CASE("membership: places taken, handed on, and pruned") {
  MemStore m;
  const Ring ring = MakeRing({1, 2, 3, 4, 5}, 1);
  MembershipState a(1, m.store.get());
  REQUIRE(a.Load(ring).ok());
  const uint32_t p = PartitionWith(ring, 1, 4);
  const uint64_t since = a.Own(p)->since;
  CHECK_FALSE(a.ReplacedBy(p).has_value());
  // An acknowledging node and the node whose place it took are one place
  // (PlaceGivers) unless that node serves again in another episode:
  // this node itself in the episode it serves, and node 2, first guessed
  // from the ring (episode 0: one place with whoever names it), then heard.
  CHECK(a.PlaceGivers(p, 0, 0).empty());
  CHECK(a.PlaceGivers(p, 1, since) == std::vector<NodeId>{1});
  CHECK(a.PlaceGivers(p, 1, since + 1).empty());
  const uint32_t r = PartitionWith(ring, 2, 4);
  CHECK(a.PlaceGivers(r, 2, 7) == std::vector<NodeId>{2});
  bool heard = false;
  a.Merge({NodeServing{2, 3, {ServeEntry{r, 3, 0, 0, 0, false}}}}, &heard);
  CHECK(a.PlaceGivers(r, 2, 3) ==
        std::vector<NodeId>{2});             // The episode taken.
  CHECK(a.PlaceGivers(r, 2, 1).empty());     // An earlier one: it came back.
  a.Merge({NodeServing{2, 5, {}}}, &heard);  // Handed over, serves no more.
  CHECK(a.PlaceGivers(r, 2, 3) == std::vector<NodeId>{2});
  // Node 4 took node 1's place, then handed it on to node 5.
  bool raised = false;
  NodeServing four{4, 7, {ServeEntry{p, 7, 1, since, 0, false}}};
  a.Merge({four}, &raised);
  REQUIRE(a.ReplacedBy(p).has_value());
  CHECK(a.ReplacedBy(p)->node == 4);
  CHECK(a.ReplacedBy(p)->holder == 4);
  CHECK(a.Replaced(1, p));
  four = NodeServing{4, 9, {ServeEntry{p, 7, 1, since, 5, true}}};
  a.Merge({four}, &raised);
  CHECK(a.ReplacedBy(p)->node == 4);
  CHECK(a.ReplacedBy(p)->holder == 0);  // Where it went is not known yet.
  a.Merge({NodeServing{5, 4, {ServeEntry{p, 4, 4, 7, 0, false}}}}, &raised);
  CHECK(a.ReplacedBy(p)->holder == 5);
  // Node 5's acknowledgement names node 4's place: the chain goes on to
  // this node, whose place node 4 had taken.
  CHECK(a.PlaceGivers(p, 4, 7) == std::vector<NodeId>{4, 1});
  // Node 1 commits, then stops serving: an original member leaves no
  // departed entry.
  REQUIRE(a.SetHandingTo(p, 4).ok());
  CHECK(a.Own(p)->handing_to == 4);
  CHECK(a.Claimed(p, 4));
  REQUIRE(a.StopServing(p).ok());
  CHECK_FALSE(a.Serves(p));
  CHECK(a.PlaceGivers(p, 1, since + 1) ==
        std::vector<NodeId>{1});  // Let go: the one.
  CHECK(std::none_of(a.own().entries.begin(), a.own().entries.end(),
                     [&](const ServeEntry& e) { return e.partition == p; }));
  // Node 1 takes node 3's place somewhere: when it leaves again, a departed
  // entry stays until node 3 no longer serves that episode.
  const uint32_t q = PartitionWith(ring, 3, 1);
  a.Merge({NodeServing{3, 2, {ServeEntry{q, 2, 0, 0, 0, false}}}}, &raised);
  REQUIRE(a.BeginServing(q, 3, 2).ok());
  REQUIRE(a.StopServing(q).ok());
  auto departed = [&]() {
    return std::count_if(
        a.own().entries.begin(), a.own().entries.end(),
        [&](const ServeEntry& e) { return e.partition == q && e.departed; });
  };
  REQUIRE(a.PruneDeparted().ok());
  CHECK(departed() == 1);
  a.Merge({NodeServing{3, 5, {}}}, &raised);  // Node 3 left q.
  REQUIRE(a.PruneDeparted().ok());
  CHECK(departed() == 0);
}

TEST_CASE(
    "membership: a leaver and the nodes its place went to share one place") {
  MemStore m;
  const Ring ring = MakeRing({1, 2, 3, 4, 5}, 1);
  // A partition of node 1 that nodes 4 and 5 do not serve.
  uint32_t p = ring.ring_size();
  for (uint32_t q = 0; q < ring.ring_size(); ++q) {
    const std::vector<NodeId>& list = ring.PreferenceList(q);
    if (Has(list, 1) && !Has(list, 4) && !Has(list, 5)) p = q;
  }
  REQUIRE(p < ring.ring_size());
  MembershipState a(1, m.store.get());
  REQUIRE(a.Load(ring).ok());
  const uint64_t since = a.Own(p)->since;
  auto place_of = [&](NodeId node) {
    const std::vector<NodeId>& list = a.ServingList(p);
    const size_t i = std::find(list.begin(), list.end(), node) - list.begin();
    REQUIRE(i < list.size());
    return a.ServingPlaces(p)[i];
  };
  REQUIRE(a.ServingPlaces(p) == std::vector<uint32_t>{0, 1, 2});
  // Node 4 took node 1's place; node 1 still serves (it has not heard the
  // acceptance): two nodes, one place.
  bool raised = false;
  a.Merge({NodeServing{4, 7, {ServeEntry{p, 7, 1, since, 0, false}}}}, &raised);
  REQUIRE(a.ServingList(p).size() == 4);
  CHECK(place_of(4) == place_of(1));
  CHECK(place_of(2) != place_of(1));
  CHECK(place_of(3) != place_of(1));
  CHECK(place_of(2) != place_of(3));
  // Node 4 handed the place on to node 5 and departed: node 5's place is
  // node 1's, through node 4's departed entry.
  a.Merge({NodeServing{4, 9, {ServeEntry{p, 7, 1, since, 5, true}}},
           NodeServing{5, 4, {ServeEntry{p, 4, 4, 7, 0, false}}}},
          &raised);
  REQUIRE(a.ServingList(p).size() == 4);
  CHECK(place_of(5) == place_of(1));
  // Node 2's view has never heard of node 1: node 4 is grouped with it all
  // the same (a guess that costs availability, never a quorum).
  MemStore m2;
  MembershipState b(2, m2.store.get());
  REQUIRE(b.Load(ring).ok());
  b.Merge({NodeServing{4, 7, {ServeEntry{p, 7, 1, since, 0, false}}}}, &raised);
  const std::vector<NodeId>& list = b.ServingList(p);
  const size_t one = std::find(list.begin(), list.end(), 1) - list.begin();
  const size_t four = std::find(list.begin(), list.end(), 4) - list.begin();
  REQUIRE(four < list.size());
  CHECK(b.ServingPlaces(p)[one] == b.ServingPlaces(p)[four]);
  // Node 1 serves p in another episode (it came back to a new place, or on
  // a new store): node 4 took an earlier one, so they are two places.
  b.Merge({NodeServing{
              1, since + 100, {ServeEntry{p, since + 100, 0, 0, 0, false}}}},
          &raised);
  const std::vector<NodeId>& again = b.ServingList(p);
  const size_t one2 = std::find(again.begin(), again.end(), 1) - again.begin();
  const size_t four2 = std::find(again.begin(), again.end(), 4) - again.begin();
  REQUIRE(one2 < again.size());
  REQUIRE(four2 < again.size());
  CHECK(b.ServingPlaces(p)[one2] != b.ServingPlaces(p)[four2]);

  // A view that cannot follow a place: node 5 took it from node 4, whom
  // node 3's view has never heard of. Node 5 is grouped with the list's
  // leavers (node 1 here: the latest ring leaves it out).
  MemStore m3;
  MembershipState c(3, m3.store.get());
  REQUIRE(c.Load(ring).ok());
  REQUIRE(c.InstallRing(MakeRing({2, 3, 4, 5}, 2)).ok());
  c.Merge({NodeServing{5, 4, {ServeEntry{p, 4, 4, 7, 0, false}}}}, &raised);
  const std::vector<NodeId>& view = c.ServingList(p);
  const size_t one3 = std::find(view.begin(), view.end(), 1) - view.begin();
  const size_t five3 = std::find(view.begin(), view.end(), 5) - view.begin();
  REQUIRE(one3 < view.size());
  REQUIRE(five3 < view.size());
  CHECK(c.ServingPlaces(p)[one3] == c.ServingPlaces(p)[five3]);
  // Once the view knows node 4 left that episode, node 5 is a place of its
  // own again (node 1 still serves its own, earlier one).
  c.Merge({NodeServing{4, 9, {}}}, &raised);
  CHECK(c.ServingPlaces(p)[one3] != c.ServingPlaces(p)[five3]);
}

TEST_CASE("membership: persisted, reopened, and refusing older rings") {
  MemStore m;
  const Ring ring = MakeRing({1, 2, 3}, 1);
  const Ring next = MakeRing({1, 2, 3, 4}, 2);
  NodeServing own;
  {
    MembershipState state(1, m.store.get());
    REQUIRE(state.Load(ring).ok());
    REQUIRE(state.InstallRing(next).ok());
    bool raised = false;
    state.Merge({NodeServing{4, 3, {ServeEntry{0, 3, 2, 1, 0, false}}}},
                &raised);
    REQUIRE(state.SetHandingTo(state.own().entries.front().partition, 4).ok());
    own = state.own();
    CHECK(absl::IsFailedPrecondition(state.InstallRing(ring)));
    CHECK(
        absl::IsInvalidArgument(state.InstallRing(MakeRing({1, 2, 3}, 9, 32))));
  }
  MembershipState again(1, m.store.get());
  REQUIRE(again.Load(next).ok());
  CHECK(again.own() == own);
  CHECK(again.ring().epoch() == 2);
  CHECK(again.base_ring().epoch() == 1);
  REQUIRE(again.StateOf(4) != nullptr);
  CHECK(again.StateOf(4)->version == 3);
  MembershipState older(1, m.store.get());
  CHECK(absl::IsFailedPrecondition(older.Load(ring)));
  // Corrupt metadata is an error, not a guess.
  WriteBatch batch;
  batch.Put(MetadataKey(kMeta, "membership"), "garbage");
  REQUIRE(m.store->Write(WriteOptions(), batch).ok());
  MembershipState broken(1, m.store.get());
  CHECK(absl::IsDataLoss(broken.Load(next)));
}

TEST_CASE("membership: a store of the earlier format is converted") {
  MemStore m;
  const Ring ring = MakeRing({1, 2, 3, 4, 5}, 3);
  // The earlier format: the ring and the serving lists that differ from it
  // (here: node 1 still serves partition p, which the ring gives node 4).
  const uint32_t p = PartitionWith(ring, 4, 1);
  std::vector<NodeId> list = ring.PreferenceList(p);
  *std::find(list.begin(), list.end(), 4) = 1;
  std::string serving;
  serving.push_back(1);
  coding::PutVarint64(&serving, 1);
  coding::PutVarint64(&serving, p);
  coding::PutVarint64(&serving, list.size());
  for (NodeId n : list) coding::PutVarint64(&serving, n);
  crc32c::AppendChecksum(&serving);
  WriteBatch batch;
  batch.Put(MetadataKey(kMeta, "ring"), ring.Encode());
  batch.Put(MetadataKey(kMeta, "serving"), serving);
  batch.Put(MetadataKey(kMeta, "move_numbers"), "x");
  REQUIRE(m.store->Write(WriteOptions(), batch).ok());
  MembershipState state(1, m.store.get());
  REQUIRE(state.Load(ring).ok());
  CHECK(state.Serves(p));
  for (uint32_t q = 0; q < ring.ring_size(); ++q) {
    if (q != p) CHECK(state.Serves(q) == Has(ring.PreferenceList(q), 1));
  }
  std::string value;
  CHECK(absl::IsNotFound(
      m.store->Get(ReadOptions(), MetadataKey(kMeta, "serving"), &value)));
  CHECK(absl::IsNotFound(
      m.store->Get(ReadOptions(), MetadataKey(kMeta, "move_numbers"), &value)));
  MembershipState again(1, m.store.get());
  REQUIRE(again.Load(ring).ok());
  CHECK(again.own() == state.own());
}

TEST_CASE("membership: views converge whatever the order of states") {
  const Ring ring = MakeRing({1, 2, 3, 4, 5}, 1, 16);
  for (uint64_t seed : Seeds(20)) {
    CAPTURE(seed);
    Rng rng(seed);
    // Random histories of states for nodes 2..6, every version of each.
    std::vector<NodeServing> all;
    std::map<NodeId, NodeServing> latest;
    for (NodeId n = 2; n <= 6; ++n) {
      uint64_t version = Uniform(rng, 1, 3);
      for (int k = 0, versions = Uniform(rng, 1, 5); k < versions; ++k) {
        NodeServing st{n, version, {}};
        for (uint32_t p = 0; p < 16; ++p) {
          if (Uniform(rng, 0, 2) == 0) {
            st.entries.push_back(
                ServeEntry{p, Uniform(rng, 1, version), 0, 0, 0, false});
          }
        }
        all.push_back(st);
        latest[n] = st;
        version += Uniform(rng, 1, 4);
      }
    }
    std::vector<std::vector<NodeId>> first;
    for (int order = 0; order < 4; ++order) {
      MemStore m;
      MembershipState state(1, m.store.get());
      REQUIRE(state.Load(ring).ok());
      std::shuffle(all.begin(), all.end(), rng);
      // Delivered one by one and in random batches, some twice.
      bool raised = false;
      for (size_t i = 0; i < all.size();) {
        const size_t k = Uniform(rng, 1, 4);
        std::vector<NodeServing> batch(
            all.begin() + i, all.begin() + std::min(all.size(), i + k));
        if (Uniform(rng, 0, 3) == 0) batch.push_back(all[i]);
        state.Merge(batch, &raised);
        i += k;
      }
      CHECK_FALSE(raised);
      std::vector<std::vector<NodeId>> lists;
      for (uint32_t p = 0; p < 16; ++p) {
        lists.push_back(state.ServingList(p));
        // The view is the latest states': node 1's own, and the others'.
        for (NodeId n = 2; n <= 6; ++n) {
          const auto& e = latest[n].entries;
          const bool serves = std::any_of(
              e.begin(), e.end(),
              [&](const ServeEntry& x) { return x.partition == p; });
          CHECK(Has(state.ServingList(p), n) == serves);
        }
      }
      if (order == 0) {
        first = lists;
      } else {
        CHECK(lists == first);
      }
    }
  }
}

}  // namespace
}  // namespace bigset::testing
