// NodeStats: a node's counters and gauges, read by name (Node::stats()).
//
// Names are "<protocol>.<counter>". Counts run since the node opened;
// gauges (marked *) are values now. Adding a counter adds a name here; no
// public struct changes.
//
//   node.messages_received
//   node.malformed_messages        undecodable, dropped
//   node.retransmits               requests sent again
//   node.replicas_open*            hosted, and handed over but not freed yet
//   read.repairs_sent              read repair: messages, and their ops
//   read.repair_ops_sent
//   read.replica_switches          a silent replica replaced mid-stream
//   read.counts_agreed             the R replicas' counts were equal
//   read.counts_merged             counted by a merged read instead
//   read.queries_hedged            queries that asked more than R places
//   read.fold_routes*              routes of this node's reads' folds
//   node.stale_routes*             routes left to ended requests (a leak)
//   write.coordinator_switches     a silent coordinating replica given up
//   write.late_coordinator_replies a given-up replica applied it after all:
//   write.extra_dots                 its delta replicated, its add dots
//   write.failovers_unsettled      ... and never answered by the deadline
//   write.failovers_refused        failover off: Unavailable instead
//                                  (ClusterWriteOptions::failover)
//   service.group_commits          synced writes that made the deltas of
//                                  one turn durable before their acks
//                                  (sync_writes)
//   service.repairs_applied        the replica side of the protocols
//   service.updates_fenced         refused: another replica coordinated it
//   service.duplicate_updates      answered from the reply cache
//   service.deltas_rejected        a context claiming unknown own events
//   service.folds_expired          their coordinator went silent
//   service.folds_open*
//   service.reply_cache_bytes*
//   sweep.errors                   the replicas' sweepers, summed
//   sweep.queue_length*
//   sweep.entries_done
//   sweep.keys_deleted
//   sweep.bytes_reclaimed
//   sweep.micros
//   handoff.ring_epoch*            the latest ring's
//   handoff.partitions_moving*     serving list not yet the latest ring's
//   handoff.pending*               transfers to send: waiting, running
//   handoff.running*
//   handoff.incoming*              transfers to receive
//   handoff.partitions_releasing*
//   handoff.forward_bytes*
//   handoff.rings_installed
//   handoff.done                   transfers completed, cancelled, restarted
//   handoff.cancelled
//   handoff.restarts
//   handoff.keys_sent
//   handoff.bytes_sent
//   handoff.keys_received
//   handoff.sets_received
//   handoff.deltas_forwarded       to receivers during a transfer
//   handoff.deltas_proxied         for a partition handed over, to its owner
//   handoff.forward_overflows
//   handoff.partitions_released
//   handoff.keys_released
//   handoff.bytes_released
//   handoff.stale_ring_reports     higher epochs told to the embedder
//   handoff.receiver_restarts      runs restarted: their receiver restarted
//   membership.version*            this node's state version
//   membership.messages_sent
//   membership.messages_received
//   membership.changes             of this node's view
//   anti_entropy.hints*
//   anti_entropy.hint_bytes*
//   anti_entropy.pushes_running*   running or queued
//   anti_entropy.rounds
//   anti_entropy.rounds_equal
//   anti_entropy.sets_compared
//   anti_entropy.sets_repaired     a push or a pull started
//   anti_entropy.updates_sent      hints resent
//   anti_entropy.keys_pushed
//   anti_entropy.keys_received
//   anti_entropy.keys_read         by pushes
//   anti_entropy.bytes_sent
//   anti_entropy.full_exchanges    equal clocks, different keys
//   anti_entropy.hints_dropped     for their bound, or never acknowledged;
//                                  each hands its partition and peer to
//   anti_entropy.hint_rounds         digest rounds at once (two, so that
//                                    a difference is confirmed)
//   anti_entropy.pushes_abandoned  the next round finds the difference
//
// Thread-safety: a value type (a snapshot).

#ifndef BIGSET_CLUSTER_NODE_STATS_H_
#define BIGSET_CLUSTER_NODE_STATS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bigset/export.h"

namespace bigset {

struct NodeCounters;

class BIGSET_EXPORT NodeStats {
 public:
  NodeStats();  // No counters: every Get fails.
  NodeStats(const NodeStats&);
  NodeStats& operator=(const NodeStats&);
  NodeStats(NodeStats&&) noexcept;
  NodeStats& operator=(NodeStats&&) noexcept;
  ~NodeStats();

  // Sets *value to counter `name` and returns true; returns false, leaving
  // *value alone, if there is no such counter.
  bool Get(std::string_view name, uint64_t* value) const;
  // Every counter with its value, grouped by protocol in the order above.
  std::vector<std::pair<std::string, uint64_t>> All() const;

 private:
  friend class Node;
  static NodeStats FromCounters(const NodeCounters& counters);

  std::vector<uint64_t> values_;  // In the order of the counter table.
};

}  // namespace bigset

#endif  // BIGSET_CLUSTER_NODE_STATS_H_
