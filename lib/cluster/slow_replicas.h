// SlowReplicas: the peers a node's hedged queries found slow lately, so
// that its next queries ask them last. Internal header.
//
// A hedged query (ClusterReadOptions::query_hedge_micros) asks R places
// first, and the rest if the hedge runs out. The node marks a peer slow
// for kSlowMicros when such a query has its answer before the peer it
// asked first answered (a peer asked later beat it: it is slow, not
// merely behind a busy moment, when having started first it would answer
// first), for every partition; and when the peer fails a query, for that
// query's partition only (a replica handing its partition over fails its
// queries, the node's others are fine). Its next queries then rank each
// place by its slowest marked peer and choose their R places, this node's
// own included, lowest rank first, so that a replica down or stalled costs
// one hedge, not one per query. They still ask only R places. (Asking
// every replica for a while instead, as the node once did, added the
// third replica's work to every query just when the cluster was slowest:
// under load a hedge runs out because every replica is busy, and asking
// all made each busier; a stalled peer also came back to a backlog of
// queries nobody waited for.)
//
// Of two peers marked, the one marked longer ago goes first: stalls that
// move from peer to peer leave the queries on the one that recovered.
//
// Thread-safety: not thread-safe; the node's thread (or a test's driver).

#ifndef BIGSET_LIB_CLUSTER_SLOW_REPLICAS_H_
#define BIGSET_LIB_CLUSTER_SLOW_REPLICAS_H_

#include <algorithm>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "bigset/net/transport.h"

namespace bigset {

class SlowReplicas {
 public:
  // How long a mark lasts.
  static constexpr uint64_t kSlowMicros = 1'000'000;

  // `node` was slow at `now`, for every partition.
  void Mark(NodeId node, uint64_t now) { Put(Key(node, kEvery), now); }
  // `node` failed a query of `partition` at `now`.
  void MarkFailed(NodeId node, uint32_t partition, uint64_t now) {
    Put(Key(node, partition), now);
  }

  // Where `node` goes among the peers a query of `partition` chooses from
  // at `now`, the lowest first: 0 if it is not marked (or its marks ran
  // out), else one more than the time of its latest mark that applies.
  uint64_t Rank(NodeId node, uint32_t partition, uint64_t now) const {
    return std::max(RankOf(Key(node, kEvery), now),
                    RankOf(Key(node, partition), now));
  }

 private:
  static constexpr uint32_t kEvery = UINT32_MAX;  // A mark of every partition.
  static uint64_t Key(NodeId node, uint32_t partition) {
    return (static_cast<uint64_t>(node) << 32) | partition;
  }
  void Put(uint64_t key, uint64_t now) {
    // Drop the marks that ran out: the map holds only the marks of the
    // last kSlowMicros.
    absl::erase_if(marked_at_, [now](const auto& entry) {
      return now >= entry.second + kSlowMicros;
    });
    marked_at_[key] = now;
  }
  uint64_t RankOf(uint64_t key, uint64_t now) const {
    const auto it = marked_at_.find(key);
    if (it == marked_at_.end() || now >= it->second + kSlowMicros) return 0;
    return it->second + 1;
  }

  // (node, partition or kEvery) -> when it was marked.
  absl::flat_hash_map<uint64_t, uint64_t> marked_at_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_SLOW_REPLICAS_H_
