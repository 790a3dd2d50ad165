// PartitionRoles: what this node is to each partition (its role), which
// replica each role lets a request use, and the view of the ring and the
// serving lists the roles come from. Internal header.
//
// The hand-off decides every role (HandoffManager derives it from its
// membership state, its transfers and the replicas it keeps, and sets it
// here at the end of each of its inputs); the replica service,
// anti-entropy and the node only read it. A partition's role:
//
//   kReleased   no replica here (none opened, or it is being deleted);
//   kReceiving  a replica the latest ring places here, which this node does
//               not serve (yet): transfers fill it; nothing else uses it;
//   kServing    it serves the partition: clients' writes, replicated
//               deltas, anti-entropy and reads use its replica;
//   kCommitted  it serves, but committed to hand its place over (or its
//               view shows the place taken): writes still apply here, but
//               reads, queries and counts do not use the replica, since
//               what it passed on may not be in it;
//   kDraining   its receiver accepted: the replica only feeds the
//               transfer's last forwards, and what arrives for the
//               partition is passed on (HandoffManager::ProxyDelta).
//
// Whether the node serves the partition by its own state is kept beside
// the role: a draining node still serves until its transfer completes,
// and a node whose replica failed to open serves with none.
//
// This is all the replica service and anti-entropy know of the hand-off:
// they read it and never change it.
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_PARTITION_ROLES_H_
#define BIGSET_LIB_CLUSTER_PARTITION_ROLES_H_

#include <cassert>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "bigset/cluster/ring.h"
#include "bigset/replica/replica.h"
#include "cluster/hosted_replicas.h"
#include "cluster/membership.h"

namespace bigset {

enum class PartitionRole : uint8_t {
  kReleased,
  kReceiving,
  kServing,
  kCommitted,
  kDraining,
};

// "released", "receiving", "serving", "committed", "draining".
std::string_view PartitionRoleName(PartitionRole role);

class PartitionRoles {
 public:
  // A partition's role and whether this node serves it.
  struct Entry {
    PartitionRole role = PartitionRole::kReleased;
    bool serves = false;
    bool operator==(const Entry&) const = default;
  };

  // Reads the replicas of `replicas` (not owned; outlives this).
  explicit PartitionRoles(const HostedReplicas* replicas)
      : replicas_(replicas) {}
  PartitionRoles(const PartitionRoles&) = delete;
  PartitionRoles& operator=(const PartitionRoles&) = delete;

  // The view the roles come from (the hand-off's; not owned, outlives
  // this). REQUIRES: set before ring() or ServingList() is called.
  void SetView(const MembershipState* view) { view_ = view; }
  // The latest ring, and the nodes that serve `partition` now, in this
  // node's view.
  const Ring& ring() const { return view_->ring(); }
  const std::vector<NodeId>& ServingList(uint32_t partition) const {
    return view_->ServingList(partition);
  }

  // The place this node serves `partition` in (msg::PlaceTaken): whose
  // place its current episode took; none when it took none or does not
  // serve the partition.
  msg::PlaceTaken PlaceOf(uint32_t partition) const {
    const ServeEntry* own = view_->Own(partition);
    if (own == nullptr) return msg::PlaceTaken();
    return msg::PlaceTaken{.from = own->took_from, .since = own->took_since};
  }

  // MembershipState::PlaceGivers for the place an acknowledgement names.
  std::vector<NodeId> PlaceGivers(uint32_t partition,
                                  const msg::PlaceTaken& taken) const {
    if (taken.from == 0) return {};
    return view_->PlaceGivers(partition, taken.from, taken.since);
  }

  // `partitions` partitions, each released.
  void Reset(uint32_t partitions) { entries_.assign(partitions, Entry{}); }
  void Set(uint32_t partition, Entry entry) { entries_[partition] = entry; }
  // In builds with assertions, every lookup compares the entry with
  // `derive`'s (the hand-off's own account, as of the lookup): a role the
  // hand-off failed to set after a change is caught where it is read.
  void CheckWith(std::function<Entry(uint32_t)> derive) {
    derive_ = std::move(derive);
  }

  // The entry of `partition` (released past the ring).
  Entry Get(uint32_t partition) const {
    const Entry e = partition < entries_.size() ? entries_[partition] : Entry{};
    assert(!derive_ || partition >= entries_.size() || e == derive_(partition));
    return e;
  }
  PartitionRole Role(uint32_t partition) const { return Get(partition).role; }
  // Whether this node serves `partition` by its own state.
  bool Serves(uint32_t partition) const { return Get(partition).serves; }

  // This node's replica of `partition` as its role allows, or nullptr:
  // Local, unless draining (what transfers into this node apply to);
  // Serving, while serving or committed (clients' writes, replicated
  // deltas, anti-entropy); Readable, while serving only (reads, queries,
  // counts).
  Replica* LocalReplica(uint32_t partition) const {
    const PartitionRole r = Role(partition);
    return r != PartitionRole::kDraining && r != PartitionRole::kReleased
               ? replicas_->Get(partition)
               : nullptr;
  }
  Replica* ServingReplica(uint32_t partition) const {
    const PartitionRole r = Role(partition);
    return r == PartitionRole::kServing || r == PartitionRole::kCommitted
               ? replicas_->Get(partition)
               : nullptr;
  }
  Replica* ReadableReplica(uint32_t partition) const {
    return Role(partition) == PartitionRole::kServing
               ? replicas_->Get(partition)
               : nullptr;
  }

 private:
  const HostedReplicas* const replicas_;
  const MembershipState* view_ = nullptr;
  std::vector<Entry> entries_;  // By partition.
  std::function<Entry(uint32_t)> derive_;
};

inline std::string_view PartitionRoleName(PartitionRole role) {
  static constexpr std::string_view kNames[] = {
      "released", "receiving", "serving", "committed", "draining"};
  static_assert(std::size(kNames) ==
                static_cast<size_t>(PartitionRole::kDraining) + 1);
  return kNames[static_cast<size_t>(role)];
}

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_PARTITION_ROLES_H_
