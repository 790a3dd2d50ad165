// PartitionRelease alone, over an in-memory store: markers first and
// synced, deletes in bounded batches, lowest partition first, what a crash
// leaves, a marker that cannot be written.

#include "cluster/partition_release.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "bigset/keys/keys.h"
#include "forwarding_store.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

// Forwards to `base`; while `fail_synced` is set, every synced write (a
// marker) fails unapplied, and the others go through. Counts the synced
// writes.
class SwitchStore final : public testing::ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  bool fail_synced = false;
  int synced_writes = 0;

  absl::Status Write(const WriteOptions& o, const WriteBatch& b) override {
    if (fail_synced && o.sync) return absl::UnavailableError("write fails");
    if (o.sync) ++synced_writes;
    return ForwardingStore::Write(o, b);
  }
};

// Keys in `store` of partition `p` (its keyspace).
size_t KeysOf(Store& store, uint32_t p) {
  std::unique_ptr<Iterator> it =
      store.NewIterator(ReadOptions(), KeyspaceRange(p));
  size_t n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  REQUIRE(it->status().ok());
  return n;
}

// A store holding `elements` elements in each of partitions 1, 2 and 3,
// and a release over it, loaded.
struct Held {
  explicit Held(int elements) : store(mem.store.get()) {
    for (uint32_t p = 1; p <= 3; ++p) {
      ReplicaOptions o;
      o.keyspace = p;
      auto replica = Replica::Open(&store, o);
      REQUIRE(replica.ok());
      for (int i = 0; i < elements; ++i) {
        AddElement(**replica, "s", "e" + std::to_string(i));
      }
      REQUIRE((*replica)->Close().ok());
    }
    keys = KeysOf(store, 1);
    REQUIRE(keys > static_cast<size_t>(elements));
    REQUIRE(KeysOf(store, 2) == keys);
    store.synced_writes = 0;
    REQUIRE(release.Load().ok());
  }
  MemStore mem;
  SwitchStore store;
  size_t keys = 0;  // Per partition.
  NodeCounters stats;
  PartitionRelease release{&store, &stats};
};

TEST_CASE(
    "partition release: a synced marker first, then bounded batches, the "
    "lowest partition first",
    "[release]") {
  Held held(50);
  PartitionRelease& release = held.release;
  CHECK(release.empty());
  CHECK(release.Holds(2));
  CHECK_FALSE(release.Holds(7));

  CHECK(release.Start(2));
  CHECK(release.Start(1));
  CHECK(held.store.synced_writes == 2);  // The two markers, nothing else.
  CHECK(release.size() == 2);
  CHECK(release.Releasing(1));
  CHECK_FALSE(release.Releasing(3));
  CHECK(KeysOf(held.store, 1) == held.keys);  // Nothing deleted yet.

  // Partition 1 goes first, 10 keys a tick; partition 2 waits.
  release.Tick(10);
  CHECK(KeysOf(held.store, 1) == held.keys - 10);
  CHECK(KeysOf(held.store, 2) == held.keys);
  int ticks = 1;
  while (release.Releasing(1)) {
    release.Tick(10);
    REQUIRE(++ticks < 1000);
  }
  CHECK(ticks == static_cast<int>(held.keys / 10 + 1));
  CHECK(KeysOf(held.store, 1) == 0);
  CHECK(KeysOf(held.store, 2) == held.keys);
  CHECK(held.stats.partitions_released == 1);
  while (!release.empty()) {
    release.Tick(1000);
    REQUIRE(++ticks < 1000);
  }
  CHECK(KeysOf(held.store, 2) == 0);
  CHECK(KeysOf(held.store, 3) == held.keys);  // Not released: untouched.
  CHECK(held.stats.partitions_released == 2);
  CHECK(held.stats.handoff_keys_released == 2 * held.keys);
  CHECK(held.stats.handoff_bytes_released > 0);
  release.Tick(10);  // Empty: nothing.
  CHECK(KeysOf(held.store, 3) == held.keys);

  // No marker is left behind: a new open finds nothing to release.
  PartitionRelease reopened(&held.store, &held.stats);
  REQUIRE(reopened.Load().ok());
  CHECK(reopened.empty());
}

TEST_CASE(
    "partition release: a crash mid-release leaves the marker, and the "
    "next open goes on",
    "[release]") {
  Held held(50);
  held.release.Start(2);
  held.release.Tick(10);
  held.release.Tick(10);
  // A crash: the object is lost, the store keeps what was written; the
  // next open has a new one.
  CHECK(KeysOf(held.store, 2) == held.keys - 20);
  PartitionRelease release(&held.store, &held.stats);
  REQUIRE(release.Load().ok());
  CHECK(release.Releasing(2));
  CHECK(release.Releases(2) == 0);  // Counted since this open only.
  REQUIRE(release.FinishNow(2).ok());
  CHECK(KeysOf(held.store, 2) == 0);
  CHECK(release.empty());
  CHECK(KeysOf(held.store, 1) == held.keys);
}

TEST_CASE(
    "partition release: no key goes before the marker is written, and "
    "FinishNow refuses until it can be",
    "[release]") {
  Held held(20);
  PartitionRelease& release = held.release;
  // Only the marker's (synced) write fails: deletes would go through.
  held.store.fail_synced = true;
  CHECK(release.Start(1));
  CHECK(release.Releasing(1));
  release.Tick(1000);
  release.Tick(1000);
  CHECK(KeysOf(held.store, 1) == held.keys);
  const absl::Status s = release.FinishNow(1);
  CHECK(absl::IsUnavailable(s));
  CHECK(absl::StrContains(s.message(), "release marker"));
  CHECK(release.Releasing(1));
  CHECK(KeysOf(held.store, 1) == held.keys);
  held.store.fail_synced = false;
  // Written now: the first tick writes the marker and deletes in the same
  // tick, since the marker is durable before the keys go.
  release.Tick(1000);
  CHECK(KeysOf(held.store, 1) == 0);
  CHECK(release.empty());
}

TEST_CASE(
    "partition release: every start counts, a start of a release under way "
    "starts nothing new",
    "[release]") {
  Held held(5);
  PartitionRelease& release = held.release;
  CHECK(release.Releases(3) == 0);
  CHECK(release.Start(3));
  CHECK_FALSE(release.Start(3));
  CHECK(release.Releases(3) == 2);
  CHECK(release.size() == 1);
  CHECK(held.store.synced_writes == 1);
  // Not releasing: FinishNow does nothing.
  REQUIRE(release.FinishNow(1).ok());
  CHECK(KeysOf(held.store, 1) == held.keys);
  REQUIRE(release.FinishNow(3).ok());
  CHECK(KeysOf(held.store, 3) == 0);
  CHECK(release.Releases(3) == 2);  // Kept after the release ends.
}

TEST_CASE("partition release: a marker that is not one is data loss",
          "[release]") {
  Held held(1);
  WriteBatch batch;
  batch.Put(MetadataKey(0xFFFFFFFF, "release/x"), "");
  REQUIRE(held.store.Write(WriteOptions(), batch).ok());
  PartitionRelease release(&held.store, &held.stats);
  CHECK(absl::IsDataLoss(release.Load()));
}

}  // namespace
}  // namespace bigset::testing
