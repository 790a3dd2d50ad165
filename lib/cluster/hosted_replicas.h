// HostedReplicas: the replicas a node keeps, one per partition, and those
// it retired. Internal header.
//
// Which partitions a node keeps is the hand-off's decision
// (HandoffManager::Hosts); this object only holds them. A retired replica
// is no longer used but kept until FreeRetired, which its owner calls from
// the scheduler: a caller up the stack may still hold it (reads hold only
// store snapshots, not replicas).
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_HOSTED_REPLICAS_H_
#define BIGSET_LIB_CLUSTER_HOSTED_REPLICAS_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bigset/cluster/node.h"
#include "bigset/replica/replica.h"
#include "bigset/store/store.h"
#include "cluster/node_counters.h"

namespace bigset {

class HostedReplicas {
 public:
  // Replicas of `partitions` partitions of `node`, in `store`, opened with
  // `*options` as it is at each open (not owned: the node's; a stateful
  // actor_id_source goes on from where the node left it), their presence
  // filters drawing on `filter_budget`.
  HostedReplicas(NodeId node, Store* store, const ReplicaOptions* options,
                 std::shared_ptr<MemoryBudget> filter_budget,
                 uint32_t partitions);
  ~HostedReplicas();
  HostedReplicas(const HostedReplicas&) = delete;
  HostedReplicas& operator=(const HostedReplicas&) = delete;

  uint32_t size() const { return static_cast<uint32_t>(replicas_.size()); }
  // Changes whenever a replica is opened, retired or cleared.
  uint64_t generation() const { return generation_; }
  // The replica of `partition`, or nullptr (none open, or out of range).
  Replica* Get(uint32_t partition) const {
    return partition < replicas_.size() ? replicas_[partition].get() : nullptr;
  }
  // Opens the replica of `partition`, which the node keeps with
  // `partitions_here - 1` others (they share the clock cache).
  // REQUIRES: partition < size() and no replica of it is open.
  absl::Status Open(uint32_t partition, size_t partitions_here);
  // Moves the replica of `partition` to the retired ones. True if it is
  // the only one there (the caller schedules FreeRetired).
  // REQUIRES: Get(partition) != nullptr.
  bool Retire(uint32_t partition);
  // Destroys the retired replicas.
  void FreeRetired() { retired_.clear(); }
  // Closes every open replica cleanly; the first error.
  absl::Status CloseAll();
  // Destroys every replica (after whatever holds their snapshots).
  void Clear();
  // The replica gauges (replicas open, the sweeper's) into *stats.
  void FillStats(NodeCounters* stats) const;

 private:
  const NodeId node_;
  Store* const store_;
  const ReplicaOptions* const options_;
  const std::shared_ptr<MemoryBudget> filter_budget_;
  std::vector<std::unique_ptr<Replica>> replicas_;  // By partition.
  std::vector<std::unique_ptr<Replica>> retired_;
  uint64_t generation_ = 0;
};

inline HostedReplicas::HostedReplicas(
    NodeId node, Store* store, const ReplicaOptions* options,
    std::shared_ptr<MemoryBudget> filter_budget, uint32_t partitions)
    : node_(node),
      store_(store),
      options_(options),
      filter_budget_(std::move(filter_budget)),
      replicas_(partitions) {}

inline HostedReplicas::~HostedReplicas() = default;

inline absl::Status HostedReplicas::Open(uint32_t partition,
                                         size_t partitions_here) {
  ReplicaOptions ro = *options_;
  ro.keyspace = partition;
  ro.clock_cache_bytes = std::max<size_t>(
      4096, options_->clock_cache_bytes / std::max<size_t>(1, partitions_here));
  ro.presence_filter_budget = filter_budget_;
  absl::StatusOr<std::unique_ptr<Replica>> r = Replica::Open(store_, ro);
  if (!r.ok()) {
    return absl::Status(r.status().code(),
                        absl::StrCat("node ", node_, ": replica of partition ",
                                     partition, ": ", r.status().message()));
  }
  replicas_[partition] = std::move(*r);
  ++generation_;
  return absl::OkStatus();
}

inline bool HostedReplicas::Retire(uint32_t partition) {
  retired_.push_back(std::move(replicas_[partition]));
  ++generation_;
  return retired_.size() == 1;
}

inline absl::Status HostedReplicas::CloseAll() {
  absl::Status first = absl::OkStatus();
  for (auto& replica : replicas_) {
    if (replica == nullptr) continue;
    absl::Status s = replica->Close();
    if (first.ok()) first = s;
  }
  return first;
}

inline void HostedReplicas::Clear() {
  replicas_.clear();
  retired_.clear();
  ++generation_;
}

inline void HostedReplicas::FillStats(NodeCounters* s) const {
  s->replicas_open = retired_.size();
  for (const auto& r : replicas_) {
    if (r == nullptr) continue;
    ++s->replicas_open;
    const ReplicaStats rs = r->stats();
    s->sweep_queue_length += rs.sweep_queue_length;
    s->sweep_entries_done += rs.sweep_entries_done;
    s->sweep_keys_deleted += rs.sweep_keys_deleted;
    s->sweep_bytes_reclaimed += rs.sweep_bytes_reclaimed;
    s->sweep_micros += rs.sweep_micros;
    s->presence_seeks += rs.presence_seeks;
    s->presence_seeks_saved += rs.presence_seeks_saved;
    s->count_scans += rs.count_scans;
    s->presence_filter_bytes += rs.presence_filter_bytes;
    s->presence_filters_dropped += rs.presence_filters_dropped;
  }
}

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_HOSTED_REPLICAS_H_
