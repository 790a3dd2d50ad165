// bigsetd's membership authority (ClusterMembership) against the node it
// serves, in one process: one NodeRunner on loopback, maps installed from
// other threads while the membership attaches, as a node that restarts
// behind its peers sees them (a peer reports a newer epoch as soon as the
// node runs, and the fetched map is installed from the fetcher's thread).

#include "membership.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "bigset/network/node_runner.h"
#include "cluster_map.h"
#include "log.h"
#include "temp_dir.h"

namespace bigset::server {
namespace {

constexpr uint32_t kSeed = 20261127;

using ::bigset::testing::TempDir;

ClusterMap MapAt(uint64_t epoch, uint16_t peer_port) {
  RingOptions ro;
  ro.ring_size = 8;
  ro.n = 1;
  ro.epoch = epoch;
  absl::StatusOr<Ring> ring = Ring::Create({1}, ro);
  REQUIRE(ring.ok());
  return ClusterMap{*ring,
                    {{1, NodeAddresses{PeerAddress{"127.0.0.1", peer_port},
                                       PeerAddress{"127.0.0.1", 1}}}}};
}

// Node 1 of a one-node ring (epoch 1) on loopback, in its own directory,
// and a directory and a log for the membership.
struct TestNode {
  TestNode()
      : log(LogLevel::kError, ""), book(std::make_shared<AddressBook>()) {
    REQUIRE(log.Open().ok());
    NodeRunnerOptions o;
    o.id = 1;
    o.data_dir = dir.path();
    o.ring = MapAt(1, 0).ring;
    o.addresses = book;
    o.transport.listen_host = "127.0.0.1";
    o.transport.listen_port = 0;
    o.transport.plaintext = true;
    absl::StatusOr<std::unique_ptr<NodeRunner>> started =
        NodeRunner::Start(std::move(o));
    REQUIRE(started.ok());
    runner = std::move(*started);
    book->Set(1, PeerAddress{"127.0.0.1", runner->port()});
  }
  ~TestNode() { CHECK(runner->Close().ok()); }

  uint16_t port() const { return runner->port(); }
  // Node 1's membership, starting from a map of `epoch`, saving into
  // `where`.
  std::unique_ptr<ClusterMembership> Membership(uint64_t epoch,
                                                const std::string& where) {
    return std::make_unique<ClusterMembership>(MapAt(epoch, port()), 1, where,
                                               "", book.get(), &log);
  }

  TempDir dir;
  TempDir map_dir;
  Logger log;
  std::shared_ptr<AddressBook> book;
  std::unique_ptr<NodeRunner> runner;
};

TEST_CASE(
    "membership: a map installed while the node starts is not lost to the "
    "starting map's save") {
  // Regression (found by the process test bigsetd_membership under load:
  // "node 2 exited with 1 at start", "rename CLUSTER.tmp: No such file or
  // directory"): bigsetd saved its starting map after attaching the node,
  // beside the membership's lock. A fetch of a newer map, started by a
  // peer's report as soon as the node ran, saved at the same time (the
  // second rename failed, and the node exited) or first (the older map
  // overwrote it). Attach now saves under the lock installs take.
  TestNode node;

  std::mt19937 rng(kSeed);
  constexpr int kRounds = 60;
  for (int round = 0; round < kRounds; ++round) {
    INFO("seed " << kSeed << ", round " << round);
    const uint64_t epoch = 1 + round;
    std::unique_ptr<ClusterMembership> m =
        node.Membership(epoch, node.map_dir.path());
    const ClusterMap newer = MapAt(epoch + 1, node.port());
    // The fetcher's install: refused (Unavailable) until the node is
    // attached, then installed, racing the attach's save.
    // (It gives up once the attach returned, so a failed attach fails the
    // test instead of hanging it.)
    std::atomic<bool> go{false};
    std::atomic<bool> attach_returned{false};
    absl::Status installed;
    std::thread fetcher([&]() {
      while (!go.load()) std::this_thread::yield();
      while (true) {
        const bool last = attach_returned.load();
        installed = m->Install(newer);
        if (!absl::IsUnavailable(installed) || last) return;
        std::this_thread::yield();
      }
    });
    go.store(true);
    std::this_thread::sleep_for(std::chrono::microseconds(
        std::uniform_int_distribution<>(0, 300)(rng)));
    absl::Status attached = m->Attach(node.runner.get());
    attach_returned.store(true);
    fetcher.join();
    INFO("attach: " << attached.ToString()
                    << "; install: " << installed.ToString());
    REQUIRE(attached.ok());
    REQUIRE(installed.ok());
    CHECK(m->Current().ring.epoch() == epoch + 1);
    // What a restart reads: the newer map, never the starting one.
    absl::StatusOr<ClusterMap> saved = ClusterMap::Load(node.map_dir.path());
    REQUIRE(saved.ok());
    REQUIRE(saved->ring.epoch() == epoch + 1);
    m->Detach();
  }
}

TEST_CASE(
    "membership: attaching saves the starting map, and refuses the "
    "node when it cannot") {
  TestNode node;

  {
    std::unique_ptr<ClusterMembership> m =
        node.Membership(1, node.map_dir.path());
    // Not attached: installs wait for the node.
    CHECK(absl::IsUnavailable(m->Install(MapAt(2, node.port()))));
    CHECK(absl::IsNotFound(ClusterMap::Load(node.map_dir.path()).status()));
    REQUIRE(m->Attach(node.runner.get()).ok());
    absl::StatusOr<ClusterMap> saved = ClusterMap::Load(node.map_dir.path());
    REQUIRE(saved.ok());
    CHECK(saved->ring.epoch() == 1);
    CHECK(saved->nodes == m->Current().nodes);
    m->Detach();
    CHECK(absl::IsUnavailable(m->Install(MapAt(2, node.port()))));
  }
  {
    // A data directory that cannot take the map: no attach.
    const std::string missing = node.map_dir.path() + "/missing";
    std::unique_ptr<ClusterMembership> m = node.Membership(1, missing);
    CHECK_FALSE(m->Attach(node.runner.get()).ok());
    CHECK(absl::IsUnavailable(m->Install(MapAt(2, node.port()))));
  }
}

}  // namespace
}  // namespace bigset::server
