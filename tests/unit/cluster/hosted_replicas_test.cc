// HostedReplicas: the replicas a node keeps, by partition, in one store.

#include "cluster/hosted_replicas.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "test_util.h"

namespace bigset {
namespace {

using testing::AddElement;
using testing::HasElement;
using testing::MemStore;

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

}  // namespace
}  // namespace bigset
