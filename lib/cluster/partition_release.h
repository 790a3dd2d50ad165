// PartitionRelease: deleting the keys of the partitions a node no longer
// hosts. Internal header (docs/ARCHITECTURE.md, "Membership and hand-off").
//
// A release first writes a marker to the node's metadata, synced; until the
// marker is durable no key is deleted (Tick writes it again), so that a
// crash mid-delete leaves a range the next open finds (Load) and finishes
// instead of serving it. Then the partition's keys go in bounded batches,
// one per Tick, the last with the marker, and the range is compacted.
// Partitions are released one at a time, lowest first.
//
// It also counts, per partition, the releases begun since the node opened:
// a hand-off receiver's acknowledgements carry another incarnation after
// each (the replica that took a run's sets so far is gone).
//
// It arms no timer and sends nothing: the hand-off ticks it while it is not
// empty.
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_PARTITION_RELEASE_H_
#define BIGSET_LIB_CLUSTER_PARTITION_RELEASE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/store/store.h"
#include "cluster/node_counters.h"

namespace bigset {

class PartitionRelease {
 public:
  // Over `store` (the node's; not owned), counting into `stats` (not
  // owned). Both outlive this.
  PartitionRelease(Store* store, NodeCounters* stats)
      : store_(store), stats_(stats) {}
  PartitionRelease(const PartitionRelease&) = delete;
  PartitionRelease& operator=(const PartitionRelease&) = delete;

  // Finds the releases a crash interrupted (their markers) and goes on
  // with them. DataLoss for a marker that is not one.
  absl::Status Load();

  // Starts releasing `partition`: writes its marker (synced) and counts the
  // release. True if no release of it was under way (it counts anyway).
  bool Start(uint32_t partition);
  // Whether the store holds a key of `partition`.
  bool Holds(uint32_t partition) const;
  // Releases `partition` whole, now (before its replica opens again):
  // Unavailable if its marker cannot be written, or the store's error.
  // OK at once if no release of it is under way.
  absl::Status FinishNow(uint32_t partition);
  // One step of the lowest partition being released: its marker, if it is
  // not written yet (nothing else then), or up to `max_keys` of its keys.
  // Nothing when empty.
  void Tick(size_t max_keys);

  bool Releasing(uint32_t partition) const {
    return releasing_.contains(partition);
  }
  // Partitions being released.
  size_t size() const { return releasing_.size(); }
  bool empty() const { return releasing_.empty(); }
  // Releases of `partition` begun since the node opened.
  uint64_t Releases(uint32_t partition) const {
    auto it = releases_.find(partition);
    return it == releases_.end() ? 0 : it->second;
  }

 private:
  void WriteMarker(uint32_t partition);
  // Deletes up to `max_keys` keys of `partition`; true when none is left
  // (the marker went with the last batch).
  absl::StatusOr<bool> DeleteSome(uint32_t partition, size_t max_keys);

  Store* const store_;
  NodeCounters* const stats_;
  std::set<uint32_t> releasing_;
  // Releases whose marker is not written yet (a failed write): retried
  // before any key is deleted.
  std::set<uint32_t> unmarked_;
  std::map<uint32_t, uint64_t> releases_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_PARTITION_RELEASE_H_
