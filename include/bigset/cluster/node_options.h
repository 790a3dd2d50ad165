// NodeOptions: how a Node runs, grouped by the subsystem each setting
// belongs to. Every group has its own timers and sizes, and every setting
// has one default: the groups a node shares with a single replica
// (ReplicaOptions, SweepOptions) are those structs themselves.
//
// Thread-safety: value types.

#ifndef BIGSET_CLUSTER_NODE_OPTIONS_H_
#define BIGSET_CLUSTER_NODE_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <functional>

#include "bigset/net/transport.h"
#include "bigset/replica/replica.h"

namespace bigset {

// The replica side of the coordinators' requests (reads, queries, writes).
struct ReplicaServiceOptions {
  // A fold nobody acknowledged or kept alive for this long is dropped (its
  // coordinator is presumed gone), releasing its snapshot. Coordinators
  // keep the folds they wait on alive (ClusterReadOptions::keepalive_micros),
  // so this must exceed their keepalive interval.
  uint64_t fold_idle_timeout_micros = 30'000'000;
  // Upper bound on a read chunk a replica sends, whatever batch size the
  // coordinator asks for: in elements, and in bytes (element bytes plus 16
  // per dot; a chunk holds at least one element). Both >= 1.
  uint32_t max_chunk_elements = 40'000;
  size_t max_chunk_bytes = 1 << 20;
  // Bytes of recent update replies kept, so that a retransmitted update is
  // answered again instead of applied twice. Oldest replies go first.
  size_t reply_cache_bytes = 8 << 20;
};

// Membership changes (docs/DESIGN.md, "Membership changes and hand-off"):
// gossip of the nodes' states, the transfers that move partitions, and the
// deletion of a partition's keys once it has moved away.
struct HandoffOptions {
  // Called (on the node's thread) the first time a message shows that
  // another node has installed a ring with a higher epoch than this node's
  // latest: the embedder should fetch that ring from its membership
  // authority and install it (Node::InstallRing). Bigset never guesses one.
  std::function<void(uint64_t epoch, NodeId from)> on_stale_ring;
  // Retransmit interval of chunks, forwarded deltas and proposals (and the
  // back-off after a refusal, times five).
  uint64_t retry_micros = 200'000;
  // Membership gossip (docs/ARCHITECTURE.md, "Membership"): while a
  // partition moves in this node's view, and for a while after any change,
  // every this often the node sends the state versions it knows to a few
  // peers in turn (a few bytes per node), and peers that are behind, or
  // ahead, answer with the states the other side lacks.
  uint64_t gossip_micros = 500'000;
  // Transfers this node sends at once (each holds one set snapshot and up
  // to `window` chunks); the others wait their turn. >= 1.
  size_t max_running = 4;
  // Chunks of a set a transfer keeps in flight (>= 1), once the set's first
  // is acknowledged: the receiver applies one while the next travel, so
  // sender and receiver work at once.
  size_t window = 4;
  // A transfer's chunks: at most this many elements and bytes (element
  // bytes plus 16 per dot; at least one element). The receiver pays a fixed
  // cost per chunk (it rewrites the stored clock's windows the chunk
  // reached), so the byte bound is usually the one that binds. Both >= 1.
  uint32_t chunk_elements = 40'000;
  size_t chunk_bytes = 1 << 20;
  // Bytes of forwarded deltas a transfer keeps until its receiver
  // acknowledges them. Past it the queue is dropped and the transfer
  // starts again from its first set (which carries those deltas).
  size_t forward_bytes = 16 << 20;
  // A receiver that hears nothing of its transfer for this long drops what
  // it kept of it (the sender starts the set again if it comes back).
  uint64_t receiver_idle_micros = 30'000'000;
  // A partition that moved away is deleted in the background: every
  // release_tick_micros, up to release_keys_per_tick keys (>= 1).
  uint64_t release_tick_micros = 100'000;
  uint64_t release_keys_per_tick = 10'000;
};

// Anti-entropy (docs/ARCHITECTURE.md, "Anti-entropy"): every interval
// (jittered between half and one and a half of it) the node compares each
// partition it holds with the other nodes serving it and repairs both
// sides. Writes that end with replicas that never acknowledged leave hints
// (their delta, in memory; the oldest go first), resent until
// acknowledged. Pushes and hints share a rate limit, so that foreground
// requests keep their latency. Every node of a cluster must use the same
// ReplicaOptions::digest_buckets.
struct AntiEntropyOptions {
  // 0 switches the rounds off (hints are still resent).
  uint64_t interval_micros = 10'000'000;
  // Retransmit interval of the rounds' requests and pushes (a hint is
  // resent after five times this, a round given up after ten).
  uint64_t retry_micros = 200'000;
  // The rate limit of pushes and hints, in bytes per second (0: none).
  uint64_t bytes_per_second = 8 << 20;
  // Memory for hints.
  size_t hint_bytes = 16 << 20;
  // A push's chunks: at most this many elements and bytes. Both >= 1.
  uint32_t chunk_elements = 40'000;
  size_t chunk_bytes = 1 << 20;
};

struct NodeOptions {
  // The node's replicas, one per partition it holds. `keyspace` is set by
  // the node (the partition); `clock_cache_bytes` is the node's total,
  // divided among its replicas; `presence_filter_bytes` is the node's
  // total too, which the replicas' filters share (first come, first
  // served: a set whose filter finds no room costs a seek per add and per
  // membership query of an element it lacks), unless
  // `presence_filter_budget` gives one (the other settings are each
  // replica's);
  // `read_only` must be false. With `sync_writes` a W
  // acknowledgement means "on disk in W machines"; without it "applied in
  // W processes" (a process crash loses nothing, a machine losing power may
  // lose the most recent writes of its replicas).
  ReplicaOptions replica;
  ReplicaServiceOptions service;
  HandoffOptions handoff;
  AntiEntropyOptions anti_entropy;
  // The sweeper (docs/DESIGN.md, "Clear and sweep"): while a replica's
  // sweep queue may hold entries, a timer every sweep.tick_micros sweeps
  // the node's replicas in turn, keys_per_second in all. No timer runs
  // while every queue is empty. tick_micros or keys_per_second 0 switches
  // it off (the embedder then calls Replica::SweepSome on LocalReplica
  // itself).
  SweepOptions sweep;
};

}  // namespace bigset

#endif  // BIGSET_CLUSTER_NODE_OPTIONS_H_
