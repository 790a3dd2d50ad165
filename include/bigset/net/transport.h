// Transport and Scheduler: what a node needs from its environment.
//
// Bigset's cluster code is a set of state machines driven by messages and
// timers, with no threads of its own. An embedder connects it to a network
// by implementing Transport (move bytes to a node id) and Scheduler (time and
// timers), and by handing every message that arrives to Node::Receive. The
// simulator (bigset/testing/sim.h) implements both deterministically.
//
// Thread-safety: a node calls its Transport and Scheduler from whatever
// thread drives it; an embedder that drives a node from several threads must
// serialise those calls (see node.h).

#ifndef BIGSET_NET_TRANSPORT_H_
#define BIGSET_NET_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "bigset/export.h"

namespace bigset {

// Identifies a node of the cluster.
using NodeId = uint32_t;

class BIGSET_EXPORT Transport {
 public:
  virtual ~Transport();

  // Sends `bytes` (an encoded Message) from `from` to `to`. Best effort:
  // messages may be lost, duplicated or reordered; the protocols tolerate
  // it. Must not call back into the sending node before returning (deliver
  // asynchronously). Sending to oneself is allowed.
  virtual void Send(NodeId from, NodeId to, std::string bytes) = 0;
};

class BIGSET_EXPORT Scheduler {
 public:
  using TimerId = uint64_t;

  virtual ~Scheduler();

  // Monotonic time in microseconds.
  virtual uint64_t NowMicros() const = 0;

  // Runs `fn` once, `delay_micros` from now, on the thread that drives the
  // node. Never runs it before returning.
  virtual TimerId After(uint64_t delay_micros, std::function<void()> fn) = 0;

  // Cancels a timer that has not fired; a no-op otherwise.
  virtual void Cancel(TimerId id) = 0;
};

// A one-line description of an encoded message for logs and traces (its
// type, request id, partition and size). Never fails: bytes that are not a
// message are described as such.
BIGSET_EXPORT std::string DescribeMessage(std::string_view bytes);

// Whether `bytes` (an encoded message) answers another node's request (a
// reply, an acknowledgement, the data of a read it asked for) rather than
// asking something. A transport that queues messages for a peer should
// send answers ahead of requests, and may shed requests first when the
// peer falls behind: a node that lags on the requests it is sent still
// hears the answers to its own, so it keeps coordinating (and the requests
// it missed are repaired by hints and anti-entropy). Malformed bytes are
// requests.
BIGSET_EXPORT bool IsAnswerMessage(std::string_view bytes);

}  // namespace bigset

#endif  // BIGSET_NET_TRANSPORT_H_
