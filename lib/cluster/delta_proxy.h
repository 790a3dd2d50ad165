// DeltaProxy: where deltas go for the partitions this node handed over,
// and the answers it owes for those it passed on. Internal header.
//
// Once a receiver accepted a partition (the sender drains), the sender's
// replica is no longer used: a delta that still reaches it (a coordinator
// or a forwarder with an old serving list) is passed on to the node that
// took its place, so that it reaches the replica that holds the partition
// now. A replicated delta is passed on under a request id of this node's,
// and its coordinator is answered only once the new owner applied it, with
// the new owner as the node that applied it (one replica acknowledges once
// however it is reached). A repair is passed on as it is: nobody awaits it.
// A delta passed on and never answered is dropped after a while (Expire).
//
// It sends nothing itself: each input returns what to send, and the
// hand-off sends it.
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_DELTA_PROXY_H_
#define BIGSET_LIB_CLUSTER_DELTA_PROXY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "bigset/cluster/node.h"
#include "bigset/core/delta.h"
#include "cluster/request_ids.h"
#include "net/message.h"

namespace bigset {

class DeltaProxy {
 public:
  // A message to send.
  struct Outgoing {
    NodeId to = 0;
    std::string bytes;
  };

  // For node `self`, taking request ids from `ids` (the node's; not owned,
  // outlives this).
  DeltaProxy(NodeId self, RequestIds* ids) : self_(self), ids_(ids) {}
  DeltaProxy(const DeltaProxy&) = delete;
  DeltaProxy& operator=(const DeltaProxy&) = delete;

  // Deltas for `partition` go to `to` from now on.
  void MovedTo(uint32_t partition, NodeId to) { moved_to_[partition] = to; }
  // Deltas for `partition` are no longer passed on.
  void Forget(uint32_t partition) { moved_to_.erase(partition); }
  // Deltas for the partitions `pred` names are no longer passed on.
  void ForgetWhere(absl::FunctionRef<bool(uint32_t)> pred);
  // Where deltas for `partition` go (0: they are not passed on).
  NodeId PassesOnTo(uint32_t partition) const {
    auto it = moved_to_.find(partition);
    return it == moved_to_.end() ? 0 : it->second;
  }

  // A delta (kReplicate, kReplicateGivenUp, kHandoffDelta or kRepair) from
  // `from` for a partition this node has no replica of: the message that
  // passes it on, or nullopt if it is not passed on (the partition did not
  // move from here, moved to this node itself, or the delta is a forward
  // from the node it would go back to). With `own` (a kReplicateGivenUp
  // for a request this node coordinated before it handed over), the
  // answer, once the new owner applied the delta, is a
  // kReplicateAckWithDelta carrying `own`. `now` dates what awaits an
  // answer.
  std::optional<Outgoing> PassOn(NodeId from, const MessageHeader& header,
                                 const Delta& delta, const Delta* own,
                                 uint64_t now);
  // An acknowledgement from `from` of request `request_id`: false if that
  // is no delta this node passed on. Else true, and *answer is the answer
  // to its coordinator if `from` is where its partition goes (the answer
  // is owed once; an acknowledgement from any other node is ignored). The
  // answer names the node that applied the delta and the place it took.
  bool OnAck(NodeId from, uint64_t request_id, const absl::Status& status,
             NodeId applied_by, const msg::PlaceTaken& taken,
             std::optional<Outgoing>* answer);
  // Drops what was passed on at least `max_age` before `now`, or after
  // `now` (the clock went back).
  void Expire(uint64_t now, uint64_t max_age);
  // Whether some delta passed on awaits its answer.
  bool awaiting() const { return !passed_.empty(); }

 private:
  // A delta passed on, by the request id it went under.
  struct Passed {
    NodeId coordinator = 0;
    MessageType reply = MessageType::kReplicateAck;
    uint64_t request_id = 0;  // The coordinator's.
    uint32_t partition = 0;
    uint64_t since = 0;
    // A given-up request this node coordinated: its delta, the answer once
    // the new owner applied the chosen one.
    std::optional<Delta> own;
  };

  const NodeId self_;
  RequestIds* const ids_;
  // Partitions this node handed over, until it hosts them again: where
  // deltas for them go.
  std::map<uint32_t, NodeId> moved_to_;
  std::map<uint64_t, Passed> passed_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_DELTA_PROXY_H_
