// RequestOutput: what a request's state machine asks of the node that
// drives it after each input (its start, a reply, a tick). Internal
// header.
//
// A machine that returns outputs does no I/O of its own: it sends nothing,
// sets no timer and calls no callback while it runs; the driver (the node,
// or a test) carries out each output in order: the sends, then the
// counters, then either the answer (`done`: the driver takes the
// machine's answer, drops the machine and then answers the client) or a
// tick at `tick_at`.

#ifndef BIGSET_LIB_CLUSTER_REQUEST_OUTPUT_H_
#define BIGSET_LIB_CLUSTER_REQUEST_OUTPUT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bigset/net/transport.h"

namespace bigset {

struct RequestOutput {
  struct Send {
    NodeId to = 0;
    std::string bytes;
    // Handled before the driver goes on, if `to` is this node (see
    // CoordinatorHost::SendFirst).
    bool first = false;
  };
  std::vector<Send> sends;  // In order.
  // The machine's next Tick is due at this time (0: this output asks for
  // none; a machine asks for its next tick only from Start and Tick, so
  // one tick is pending at a time).
  uint64_t tick_at = 0;
  // The machine has answered: the driver takes the answer and drops it.
  bool done = false;

  // Counters (NodeCounters of the same names).
  uint64_t retransmits = 0;
  uint64_t queries_hedged = 0;
  uint64_t repairs_sent = 0;
  uint64_t repair_ops_sent = 0;
  // Queries of this node ask every replica at once for this long from now
  // (0: as they did; see CoordinatorHost::QueriesAskAllUntil).
  uint64_t ask_all_for_micros = 0;

  void Add(NodeId to, std::string bytes, bool first_ = false) {
    sends.push_back(Send{to, std::move(bytes), first_});
  }
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_REQUEST_OUTPUT_H_
