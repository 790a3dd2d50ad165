// Ring: which nodes hold which sets (Dynamo-style preference lists).
//
// A set name hashes (with a fixed, platform-independent hash) to one of
// `ring_size` partitions; partition p is owned by node p mod |nodes|, and its
// preference list is the owner and the next N-1 distinct nodes around the
// ring. Every replica of a partition is keyspace p in its node's store.
//
// Thread-safety: immutable after construction; safe for concurrent use.

#ifndef BIGSET_CLUSTER_RING_H_
#define BIGSET_CLUSTER_RING_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "bigset/export.h"
#include "bigset/net/transport.h"

namespace bigset {

// Partitions are keyspaces of a node's store; the largest keyspace ids stay
// free for the node's own metadata.
inline constexpr uint32_t kMaxRingSize = uint32_t{1} << 24;

// How partitions are placed on nodes.
enum class Placement {
  // Partition p on nodes p, p+1, ..., p+n-1 (mod the node count): even,
  // but adding or removing a node changes almost every preference list.
  kRoundRobin,
  // Rendezvous (highest random weight) hashing: the n nodes with the
  // highest StableHash(p, node). A node that joins takes about n/(N+1) of
  // the partition replicas and every other replica stays where it was; a
  // node that leaves gives up only its own.
  kRendezvous,
};

struct RingOptions {
  uint32_t ring_size = 64;  // Partitions.
  int n = 3;                // Replicas per partition.
  // Rings with a higher epoch replace rings with a lower one (the
  // embedder's membership authority numbers them).
  uint64_t epoch = 0;
  Placement placement = Placement::kRoundRobin;
};

class BIGSET_EXPORT Ring {
 public:
  // InvalidArgument unless nodes are non-empty and distinct,
  // 1 <= ring_size <= kMaxRingSize and 1 <= n <= |nodes| (any n: a write
  // tracks acknowledgements for any number of replicas).
  static absl::StatusOr<Ring> Create(std::vector<NodeId> nodes,
                                     const RingOptions& options);

  uint32_t ring_size() const { return ring_size_; }
  uint64_t epoch() const { return epoch_; }
  Placement placement() const { return placement_; }
  int n() const { return n_; }
  const std::vector<NodeId>& nodes() const { return nodes_; }

  // The partition of a set name. Stable across processes and platforms.
  uint32_t PartitionOf(std::string_view set) const;

  // The N distinct nodes that hold `partition`, the owner first.
  const std::vector<NodeId>& PreferenceList(uint32_t partition) const {
    return preference_[partition];
  }

  // The partitions `node` holds a replica of, ascending.
  std::vector<uint32_t> PartitionsOf(NodeId node) const;

  // A coverage plan: for each chosen node, the partitions to ask it about,
  // such that every partition is covered once, using few nodes (greedy set
  // cover: for listing every set with the fewest replicas).
  std::map<NodeId, std::vector<uint32_t>> CoveragePlan() const;

  // A self-checking encoding of the ring's definition (nodes and options;
  // docs/FORMATS.md, "Node metadata"), and its decoder: DataLoss for bytes
  // that are not one.
  std::string Encode() const;
  static absl::StatusOr<Ring> Decode(std::string_view bytes);

 private:
  Ring() = default;

  uint32_t ring_size_ = 0;
  int n_ = 0;
  uint64_t epoch_ = 0;
  Placement placement_ = Placement::kRoundRobin;
  std::vector<NodeId> nodes_;
  std::vector<std::vector<NodeId>> preference_;
};

// 64-bit FNV-1a, the ring's stable hash.
BIGSET_EXPORT uint64_t StableHash(std::string_view bytes);

// One partition replica to hand off when the ring changes: `from` streams
// the partition to `to`.
struct PartitionTransfer {
  uint32_t partition = 0;
  NodeId from = 0;
  NodeId to = 0;
  friend bool operator==(const PartitionTransfer&,
                         const PartitionTransfer&) = default;
};

// The hand-offs that take `old_ring` to `new_ring`, by partition. A
// partition whose preference list has the same nodes (in any order) moves
// nothing. Otherwise every node that joins its list receives it from one
// node of the old list: the nodes that leave the list hand over, paired in
// list order with the nodes that join, so that what only a leaving node
// holds reaches the new list; joiners beyond the leavers receive from the
// old owner. Every node computes the same plan from the same two rings.
// InvalidArgument unless both have the same ring_size and the new epoch is
// higher.
BIGSET_EXPORT absl::StatusOr<std::vector<PartitionTransfer>> PlanTransfers(
    const Ring& old_ring, const Ring& new_ring);

// The hand-offs of one partition from the nodes `before` to the nodes
// `after`, by the rule of PlanTransfers (none if they hold the same nodes).
BIGSET_EXPORT std::vector<PartitionTransfer> PlanPartitionTransfers(
    uint32_t partition, const std::vector<NodeId>& before,
    const std::vector<NodeId>& after);

}  // namespace bigset

#endif  // BIGSET_CLUSTER_RING_H_
