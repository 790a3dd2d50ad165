// ProtocolHooks: how one of a node's protocols reaches another through the
// node, without knowing it. Internal header.
//
// The replica side applies deltas that a hand-off in progress must forward
// (OnApplied), may receive deltas for a partition this node handed over
// (ProxyDelta) or be asked about one by a node that is behind (TellMoved);
// membership changes open and retire replicas (HostingChanged). Node::Impl
// implements it by calling the protocol concerned; the replica service and
// hand-off reach it through CoordinatorHost::hooks(). (The write
// coordinator's applied deltas and hints are outputs its driver carries
// out.)
//
// Thread-safety: called on the node's one thread (see node.h).

#ifndef BIGSET_LIB_CLUSTER_PROTOCOL_HOOKS_H_
#define BIGSET_LIB_CLUSTER_PROTOCOL_HOOKS_H_

#include <cstdint>
#include <string>

#include "bigset/core/delta.h"
#include "bigset/net/transport.h"
#include "net/message.h"

namespace bigset {

class ProtocolHooks {
 public:
  virtual ~ProtocolHooks() = default;

  // A delta (kReplicate, kReplicateGivenUp, kHandoffDelta or kRepair)
  // arrived for a partition this node has no replica of: true if the node
  // handed the partition to another node, passed the delta on to it, and
  // answers `from` itself (with the new owner's status), so that a
  // coordinator with an old serving list still reaches the replica that
  // holds the partition now. With `own` (a kReplicateGivenUp for a request
  // this node coordinated before it handed over), the answer, once the new
  // owner applied the delta, is a kReplicateAckWithDelta carrying `own`.
  virtual bool ProxyDelta(NodeId from, const MessageHeader& header,
                          const Delta& delta, const Delta* own) = 0;
  // This node's replica of `partition` applied `delta` (coordinated,
  // replicated or repaired): hand-offs forward it.
  virtual void OnApplied(uint32_t partition, const Delta& delta) = 0;
  // The partitions this node hosts may have changed: open the replicas of
  // new ones, retire and release the others. False if a replica failed to
  // open (the caller calls again later).
  virtual bool HostingChanged() = 0;
  // `to` asked about a partition this node holds no replica of: tell it
  // this node's ring epoch (it may be behind).
  virtual void TellMoved(NodeId to, uint32_t partition) = 0;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_PROTOCOL_HOOKS_H_
