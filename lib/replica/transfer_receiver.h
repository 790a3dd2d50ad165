// ReplicaImpl::TransferReceiver: the receiving side of a set transfer
// (hand-off and anti-entropy pushes; docs/DESIGN.md, "Membership changes
// and hand-off"), whole in one class. Internal header.
//
// A transfer sends a set as chunks of (element, dots) in element order;
// each chunk is one atomic batch here: its keys whose dots this replica
// has not seen are put, their dots enter the set-clock, and `tracker`
// learns every dot the chunk held. At the end, the sender's set-clock
// minus what it sent (the tracker) is what it removed: the part of it this
// replica has seen joins the set-tombstone, and the sender's clock joins
// the set-clock.
//
// Thread-safety: as the replica's writes (each call under the set's stripe
// lock). A nested class of ReplicaImpl: it commits through the replica's
// stripes, set states and counts; it keeps no state of its own.

#ifndef BIGSET_LIB_REPLICA_TRANSFER_RECEIVER_H_
#define BIGSET_LIB_REPLICA_TRANSFER_RECEIVER_H_

#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "bigset/replica/replica.h"
#include "replica/replica_impl.h"

namespace bigset {

class ReplicaImpl::TransferReceiver {
 public:
  // `replica` (not owned) outlives this.
  explicit TransferReceiver(ReplicaImpl* replica) : replica_(replica) {}

  // Replica::ApplyTransferChunk.
  absl::Status ApplyChunk(std::string_view set,
                          std::span<const ElementDots> chunk, Clock* tracker);
  // Replica::FinishTransfer.
  absl::Status Finish(std::string_view set, const Clock& sender_clock,
                      const Clock& tracker);

 private:
  // CheckOwnDots for every element of a chunk, and no dot 0.
  absl::Status CheckChunkDots(std::string_view set, const Clock& clock,
                              std::span<const ElementDots> chunk) const;
  // Whether the store holds no element key of `set` from element `first`
  // to element `last` (both included), as of the write's iterator.
  absl::StatusOr<bool> SpanHasNoKeys(std::string_view set,
                                     std::string_view first,
                                     std::string_view last,
                                     StateChanges* changes);

  ReplicaImpl* const replica_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_REPLICA_TRANSFER_RECEIVER_H_
