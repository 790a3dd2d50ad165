// NodeCounters: the counters a node's protocols increment, and the table
// that names them for NodeStats (include/bigset/cluster/node_stats.h).
// Internal header: adding a counter adds a field here and a row to the
// table, and changes no public type.
//
// Thread-safety: not thread-safe (the node's thread).

#ifndef BIGSET_LIB_CLUSTER_NODE_COUNTERS_H_
#define BIGSET_LIB_CLUSTER_NODE_COUNTERS_H_

#include <cstdint>
#include <span>

namespace bigset {

struct NodeCounters {
  uint64_t messages_received = 0;
  uint64_t malformed_messages = 0;
  uint64_t repairs_sent = 0;
  uint64_t repair_ops_sent = 0;
  uint64_t repairs_applied = 0;
  uint64_t retransmits = 0;
  uint64_t group_commits = 0;
  // Writes that gave up on a silent coordinating replica and asked the
  // next one (the first may still have applied the update).
  uint64_t coordinator_switches = 0;
  // Deltas of given-up coordinating replicas that had applied the write
  // after all (a late answer), replicated like any delta; the add dots
  // they created; writes that reached their deadline with a given-up
  // replica that never answered or an extra delta acknowledged by fewer
  // than W (see ClusterWriteOptions::failover).
  uint64_t late_coordinator_replies = 0;
  uint64_t extra_dots = 0;
  uint64_t failovers_unsettled = 0;
  // Writes this node's replicas refused to coordinate because another
  // replica had coordinated them (a delayed request after a switch).
  uint64_t updates_fenced = 0;
  // Writes failed with Unavailable instead of switching coordinator
  // (ClusterWriteOptions::failover = false).
  uint64_t failovers_refused = 0;
  // Update requests answered from the reply cache (retransmissions).
  uint64_t duplicate_updates = 0;
  // Deltas and repairs a replica refused (e.g. a context claiming events
  // of this replica's actor that it never generated).
  uint64_t deltas_rejected = 0;
  // Reads that replaced a silent replica by another one mid-stream.
  uint64_t read_replica_switches = 0;
  // Counts (Count) the R replicas agreed on (constant time), and counts
  // made by a merged read because they differed.
  uint64_t counts_agreed = 0;
  uint64_t counts_merged = 0;
  // Queries that asked more than R places (ClusterReadOptions::
  // query_hedge_micros): slow or failed replicas.
  uint64_t queries_hedged = 0;
  // Folds dropped because their coordinator went silent.
  uint64_t folds_expired = 0;
  // Sweeps of a set that failed (see ReplicaStats::sweep_errors).
  uint64_t sweep_errors = 0;
  // Gauges (now, not counted since open): folds this node's replicas
  // serve, and the bytes of cached update replies.
  uint64_t folds_open = 0;
  uint64_t reply_cache_bytes = 0;
  // Gauge: routes of the folds of the reads this node coordinates (none
  // once every read ended).
  uint64_t fold_routes = 0;
  // Gauge: routes of sub-requests (read folds, extra deltas) to requests
  // that have ended (0 unless a request forgot to unroute one).
  uint64_t stale_routes = 0;
  // Replica objects the node holds: those it hosts, and those it retired
  // (handed over) and frees at its next turn.
  uint64_t replicas_open = 0;
  // The sweepers of the node's replicas, summed (see ReplicaStats): sets
  // queued now, and since open entries done, keys deleted, bytes of
  // deleted keys and time spent.
  uint64_t sweep_queue_length = 0;
  uint64_t sweep_entries_done = 0;
  uint64_t sweep_keys_deleted = 0;
  uint64_t sweep_bytes_reclaimed = 0;
  uint64_t sweep_micros = 0;
  // The counts' presence filters of the node's replicas, summed (see
  // ReplicaStats): seeks a write made and seeks a query saved, count
  // scans, the filters' bytes now (a gauge) and filters dropped.
  uint64_t presence_seeks = 0;
  uint64_t presence_seeks_saved = 0;
  uint64_t count_scans = 0;
  uint64_t presence_filter_bytes = 0;
  uint64_t presence_filters_dropped = 0;
  // Membership (gauges first): the latest ring's epoch; partitions whose
  // serving list is not yet the latest ring's; transfers this node must
  // send that wait their turn, and that run; transfers it receives;
  // partitions whose keys it is deleting after handing them off.
  uint64_t ring_epoch = 0;
  uint64_t partitions_moving = 0;
  uint64_t handoffs_pending = 0;
  uint64_t handoffs_running = 0;
  uint64_t handoffs_incoming = 0;
  uint64_t partitions_releasing = 0;
  uint64_t handoff_forward_bytes = 0;
  // Since open: rings installed; transfers completed, cancelled (a later
  // ring no longer wants them) and restarted (whole, or one set); element
  // keys and bytes sent; element keys and sets received; deltas
  // forwarded to receivers, and forward queues dropped for their bound;
  // partitions released, with their keys and bytes; higher ring epochs
  // reported to the embedder.
  uint64_t rings_installed = 0;
  uint64_t handoffs_done = 0;
  uint64_t handoffs_cancelled = 0;
  uint64_t handoff_restarts = 0;
  uint64_t handoff_keys_sent = 0;
  uint64_t handoff_bytes_sent = 0;
  uint64_t handoff_keys_received = 0;
  uint64_t handoff_sets_received = 0;
  uint64_t handoff_deltas_forwarded = 0;
  // Deltas for a partition this node handed over, passed on to its new
  // owner for a coordinator that still had the old serving list.
  uint64_t handoff_deltas_proxied = 0;
  uint64_t handoff_forward_overflows = 0;
  uint64_t partitions_released = 0;
  uint64_t handoff_keys_released = 0;
  uint64_t handoff_bytes_released = 0;
  uint64_t stale_ring_reports = 0;
  // Runs started again because their receiver restarted mid-run (what it
  // acknowledged before may be lost).
  uint64_t handoff_receiver_restarts = 0;
  // Membership: this node's state version (a gauge); gossip messages sent
  // and received; changes of this node's view.
  uint64_t membership_version = 0;
  uint64_t membership_messages_sent = 0;
  uint64_t membership_messages_received = 0;
  uint64_t membership_changes = 0;
  // Anti-entropy. Gauges: hints kept and their bytes; pushes running or
  // queued. Since open: digest rounds started, and those that found the
  // partitions equal; sets whose summaries were compared; sets repaired
  // (a push or a pull started); updates sent (hints resent), element keys
  // pushed and received, and read to push; bytes of every anti-entropy
  // message sent; sets exchanged whole (equal clocks, different keys); hints
  // dropped for their bound; pushes given up (the next round finds the
  // difference).
  uint64_t ae_hints = 0;
  uint64_t ae_hint_bytes = 0;
  uint64_t ae_pushes_running = 0;
  uint64_t ae_rounds = 0;
  uint64_t ae_rounds_equal = 0;
  uint64_t ae_sets_compared = 0;
  uint64_t ae_sets_repaired = 0;
  uint64_t ae_updates_sent = 0;
  uint64_t ae_keys_pushed = 0;
  uint64_t ae_keys_received = 0;
  // Element keys read by pushes (comparisons read none).
  uint64_t ae_keys_read = 0;
  uint64_t ae_bytes_sent = 0;
  uint64_t ae_full_exchanges = 0;
  uint64_t ae_hints_dropped = 0;
  uint64_t ae_hint_rounds = 0;
  uint64_t ae_pushes_abandoned = 0;
};

// One counter: its public name ("<protocol>.<counter>") and its field.
struct CounterEntry {
  const char* name;
  uint64_t NodeCounters::*field;
};

// Every counter, grouped by protocol, in the order NodeStats lists them.
std::span<const CounterEntry> CounterTable();

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_NODE_COUNTERS_H_
