// SlowReplicas: the peers a node's hedged queries found slow lately, so
// that its next queries ask them last. Internal header.
//
// A hedged query (ClusterReadOptions::query_hedge_micros) asks R places
// first, and the rest if the hedge runs out. When its answer is then in
// before a peer asked first answered (a peer asked later beat it: it is
// slow, not merely behind a busy moment, when it would answer first), or
// when a peer fails, the node marks that peer slow for kSlowMicros; its
// next queries put it behind the others when they choose
// their R places, so that a replica down or stalled costs one hedge, not
// one per query. They still ask only R places. (Asking every replica for a
// while instead, as the node once did, added the third replica's work to
// every query just when the cluster was slowest: under load a hedge runs
// out because every replica is busy, and asking all made each busier, so
// that hedges kept firing; a stalled peer also came back to a backlog of
// queries nobody waited for.)
//
// Of two peers marked, the one marked longer ago goes first: stalls that
// move from peer to peer leave the queries on the one that recovered.
//
// Thread-safety: not thread-safe; the node's thread (or a test's driver).

#ifndef BIGSET_LIB_CLUSTER_SLOW_REPLICAS_H_
#define BIGSET_LIB_CLUSTER_SLOW_REPLICAS_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "bigset/net/transport.h"

namespace bigset {

class SlowReplicas {
 public:
  // How long a peer stays marked.
  static constexpr uint64_t kSlowMicros = 1'000'000;

  // `node` was slow at `now`.
  void Mark(NodeId node, uint64_t now) {
    // Drop the marks that ran out: the map holds at most the peers marked
    // within the last kSlowMicros.
    absl::erase_if(marked_at_, [now](const auto& entry) {
      return now >= entry.second + kSlowMicros;
    });
    marked_at_[node] = now;
  }

  // Where `node` goes among the peers a query chooses from at `now`, the
  // lowest first: 0 if it is not marked (or its mark ran out), else one
  // more than the time it was marked.
  uint64_t Rank(NodeId node, uint64_t now) const {
    const auto it = marked_at_.find(node);
    if (it == marked_at_.end() || now >= it->second + kSlowMicros) return 0;
    return it->second + 1;
  }

 private:
  absl::flat_hash_map<NodeId, uint64_t> marked_at_;  // Node -> when.
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_SLOW_REPLICAS_H_
