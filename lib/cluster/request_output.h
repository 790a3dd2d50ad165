// RequestOutput: what a request's state machine asks of the node that
// drives it after each input (its start, a reply, a tick). Internal
// header.
//
// A machine that returns outputs does no I/O of its own: it sends nothing,
// sets no timer, writes to no replica and calls no callback while it runs;
// the driver (the node, or a test) carries out each output in order: the
// sends, the counters, the hints and unroutes; then it takes the answer if
// there is one (`answered` or `done`) and drops the machine if `done`;
// else it carries out what goes back into the machine (a write's
// `extras_to_number` and `coordinate_here`, a read's `folds_to_open`,
// `local_clocks`, `clock_ready` and `chunk_ready`) and sets the tick at
// `tick_at`; last it answers the client (from the scheduler, if the input
// was the client's own call).

#ifndef BIGSET_LIB_CLUSTER_REQUEST_OUTPUT_H_
#define BIGSET_LIB_CLUSTER_REQUEST_OUTPUT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bigset/core/element_bounds.h"
#include "bigset/net/transport.h"

namespace bigset {

struct RequestOutput {
  struct Send {
    NodeId to = 0;
    std::string bytes;
    // Handled before the driver goes on, if `to` is this node (see
    // Node::Impl::SendFirst).
    bool first = false;
  };
  std::vector<Send> sends;  // In order.
  // The machine's next Tick is due at this time (0: this output asks for
  // none; a machine asks for its next tick only from Start and Tick, so
  // one tick is pending at a time).
  uint64_t tick_at = 0;
  // The machine has answered: the driver takes the answer and drops it.
  bool done = false;
  // The client's answer is ready (TakeAnswer); the machine goes on (a write
  // replicates to the replicas beyond W).
  bool answered = false;

  // A write: apply it to this node's replica of its partition and give the
  // outcome to the machine (WriteCoordinator::Coordinated).
  bool coordinate_here = false;
  // A write: this many new extra deltas await a request id each, routed to
  // the write (WriteCoordinator::NumberExtra).
  uint32_t extras_to_number = 0;
  // Delta messages a replica never acknowledged: anti-entropy resends them.
  struct Hint {
    NodeId to = 0;
    uint32_t partition = 0;
    uint64_t request_id = 0;
    std::string bytes;
  };
  std::vector<Hint> hints;
  // Sub-request ids routed to the machine that it no longer uses.
  std::vector<uint64_t> unroutes;

  // A read: folds to open on `node`, each under a new request id
  // (ReadCoordinator::FoldOpened), in order.
  struct Fold {
    uint32_t slot = 0;
    NodeId node = 0;
    ElementBounds bounds;
  };
  std::vector<Fold> folds_to_open;
  // A read: local folds whose clock the driver delivers from the scheduler
  // (ReadCoordinator::LocalClock).
  std::vector<uint64_t> local_clocks;
  // A read: the client gets the merged clock, then the chunk.
  bool clock_ready = false;
  bool chunk_ready = false;

  // Counters (NodeCounters of the same names).
  uint64_t retransmits = 0;
  uint64_t queries_hedged = 0;
  uint64_t repairs_sent = 0;
  uint64_t repair_ops_sent = 0;
  uint64_t coordinator_switches = 0;
  uint64_t late_coordinator_replies = 0;
  uint64_t extra_dots = 0;
  uint64_t failovers_unsettled = 0;
  uint64_t failovers_refused = 0;
  uint64_t malformed_messages = 0;
  uint64_t read_replica_switches = 0;
  // Peers a hedged query found slow: still silent when it answered after
  // its hedge ran out (for every partition), or failed (for the query's
  // partition only). The node's next queries ask them last
  // (slow_replicas.h).
  struct SlowPeer {
    NodeId node = 0;
    uint32_t partition = 0;
    bool every_partition = false;
    bool operator==(const SlowPeer&) const = default;
  };
  std::vector<SlowPeer> slow;

  void Add(NodeId to, std::string bytes, bool first_ = false) {
    sends.push_back(Send{to, std::move(bytes), first_});
  }
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_REQUEST_OUTPUT_H_
