// HostedReplicas: the replicas a node keeps, by partition, in one store;
// PartitionRoles: which of them each partition's role lets a request use.

#include "cluster/hosted_replicas.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "cluster/partition_roles.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

// Every open takes a new actor (the options are copied at each open: the
// counter is shared).
ReplicaOptions Options() {
  ReplicaOptions o;
  auto next = std::make_shared<uint64_t>(100);
  o.actor_id_source = [next]() { return (*next)++; };
  return o;
}

// A node's replicas over `partitions` partitions of one in-memory store.
struct Hosted {
  explicit Hosted(uint32_t partitions)
      : replicas(1, mem.store.get(), &options,
                 std::make_shared<MemoryBudget>(1 << 20), partitions) {}
  MemStore mem;
  const ReplicaOptions options = Options();
  HostedReplicas replicas;
};

uint64_t Open(const HostedReplicas& replicas) {
  NodeCounters stats;
  replicas.FillStats(&stats);
  return stats.replicas_open;
}

TEST_CASE("hosted replicas: each partition's replica is its own keyspace",
          "[hosted_replicas]") {
  Hosted hosted(4);
  HostedReplicas& replicas = hosted.replicas;
  REQUIRE(replicas.size() == 4);
  REQUIRE(replicas.Open(0, 2).ok());
  REQUIRE(replicas.Open(2, 2).ok());
  REQUIRE(replicas.Get(0) != nullptr);
  REQUIRE(replicas.Get(1) == nullptr);
  REQUIRE(replicas.Get(2) != nullptr);
  REQUIRE(replicas.Get(4) == nullptr);  // Out of range: none, no crash.
  REQUIRE(replicas.Get(UINT32_MAX) == nullptr);
  AddElement(*replicas.Get(0), "s", "a");
  REQUIRE(HasElement(*replicas.Get(0), "s", "a"));
  REQUIRE_FALSE(HasElement(*replicas.Get(2), "s", "a"));
  REQUIRE(Open(replicas) == 2);
  REQUIRE(replicas.CloseAll().ok());
}

TEST_CASE(
    "hosted replicas: a retired replica counts until freed, and its "
    "partition opens again with what it stored",
    "[hosted_replicas]") {
  Hosted hosted(3);
  HostedReplicas& replicas = hosted.replicas;
  REQUIRE(replicas.Open(1, 1).ok());
  AddElement(*replicas.Get(1), "s", "kept");
  // The first retired asks its owner to free them; a second does not.
  REQUIRE(replicas.Retire(1));
  REQUIRE(replicas.Get(1) == nullptr);
  REQUIRE(Open(replicas) == 1);
  const absl::Status reopened = replicas.Open(1, 1);
  INFO(reopened.ToString());
  REQUIRE(reopened.ok());
  REQUIRE(Open(replicas) == 2);
  // The keys stay until the hand-off releases them: the new replica of
  // the partition sees them.
  REQUIRE(HasElement(*replicas.Get(1), "s", "kept"));
  REQUIRE_FALSE(replicas.Retire(1));
  REQUIRE(Open(replicas) == 2);
  replicas.FreeRetired();
  REQUIRE(Open(replicas) == 0);
  REQUIRE(replicas.Open(1, 1).ok());
  REQUIRE(replicas.Retire(1));
  replicas.Clear();
  REQUIRE(Open(replicas) == 0);
}

TEST_CASE("hosted replicas: the sweeper's gauges add up over the replicas",
          "[hosted_replicas]") {
  Hosted hosted(2);
  HostedReplicas& replicas = hosted.replicas;
  REQUIRE(replicas.Open(0, 2).ok());
  REQUIRE(replicas.Open(1, 2).ok());
  for (uint32_t p = 0; p < 2; ++p) {
    Replica& r = *replicas.Get(p);
    AddElement(r, "s", "x");
    // A clear of everything seen leaves the removed key to the sweeper.
    auto reader = r.Read("s", SetReadOptions());
    REQUIRE(reader.ok());
    REQUIRE(r.Clear("s", (*reader)->clock()).ok());
  }
  NodeCounters stats;
  replicas.FillStats(&stats);
  const uint64_t queued = replicas.Get(0)->stats().sweep_queue_length +
                          replicas.Get(1)->stats().sweep_queue_length;
  REQUIRE(queued > 0);
  REQUIRE(stats.sweep_queue_length == queued);
  REQUIRE(stats.replicas_open == 2);
}

TEST_CASE(
    "partition roles: each role lets through the replicas it names, and a "
    "role changes only when set",
    "[hosted_replicas][roles]") {
  Hosted hosted(2);
  REQUIRE(hosted.replicas.Open(0, 1).ok());
  Replica* const replica = hosted.replicas.Get(0);
  PartitionRoles roles(&hosted.replicas);
  // Before Reset, and past the ring: released.
  CHECK(roles.Role(0) == PartitionRole::kReleased);
  CHECK(roles.LocalReplica(0) == nullptr);
  roles.Reset(2);
  // role -> (local, serving, readable). The accessors go by the role alone:
  // whether the node serves (a draining node still does) changes nothing.
  struct Row {
    PartitionRole role;
    std::string_view name;
    bool local, serving, readable;
  };
  const Row table[] = {
      {PartitionRole::kReleased, "released", false, false, false},
      {PartitionRole::kReceiving, "receiving", true, false, false},
      {PartitionRole::kServing, "serving", true, true, true},
      {PartitionRole::kCommitted, "committed", true, true, false},
      {PartitionRole::kDraining, "draining", false, false, false},
  };
  for (const Row& row : table) {
    for (const bool serves : {false, true}) {
      INFO(row.name << (serves ? ", serves" : ", does not serve"));
      roles.Set(0, {row.role, serves});
      CHECK(PartitionRoleName(roles.Role(0)) == row.name);
      CHECK(roles.Serves(0) == serves);
      CHECK((roles.LocalReplica(0) == replica) == row.local);
      CHECK((roles.ServingReplica(0) == replica) == row.serving);
      CHECK((roles.ReadableReplica(0) == replica) == row.readable);
      // A partition without a replica gives none, whatever its role.
      roles.Set(1, {row.role, serves});
      CHECK(roles.LocalReplica(1) == nullptr);
      CHECK(roles.ServingReplica(1) == nullptr);
      CHECK(roles.ReadableReplica(1) == nullptr);
    }
  }
  CHECK(roles.Role(2) == PartitionRole::kReleased);
  CHECK(roles.LocalReplica(7) == nullptr);
  // The table is read, never derived: retiring the replica changes no role,
  // and the accessors then give none.
  roles.Set(0, {PartitionRole::kServing, true});
  hosted.replicas.Retire(0);
  CHECK(roles.Role(0) == PartitionRole::kServing);
  CHECK(roles.ServingReplica(0) == nullptr);
  hosted.replicas.FreeRetired();
}

TEST_CASE(
    "hosted replicas: the generation moves with every open, retire and "
    "clear, and only then",
    "[hosted_replicas][roles]") {
  Hosted hosted(3);
  HostedReplicas& replicas = hosted.replicas;
  uint64_t g = replicas.generation();
  REQUIRE(replicas.Open(1, 1).ok());
  CHECK(replicas.generation() > g);
  g = replicas.generation();
  (void)replicas.Get(1);
  NodeCounters stats;
  replicas.FillStats(&stats);
  CHECK(replicas.generation() == g);
  (void)replicas.Retire(1);
  CHECK(replicas.generation() > g);
  g = replicas.generation();
  replicas.FreeRetired();
  CHECK(replicas.generation() == g);
  REQUIRE(replicas.Open(2, 1).ok());
  CHECK(replicas.generation() > g);
  g = replicas.generation();
  replicas.Clear();
  CHECK(replicas.generation() > g);
}

}  // namespace
}  // namespace bigset::testing
