// The answers of a set stream's receiver, one vocabulary for the two
// protocols that stream a set's elements in acknowledged chunks (hand-off
// transfers, kTransferChunk/kTransferAck; anti-entropy pushes,
// kAePush/kAePushAck). Internal header.
//
//   OK           the chunk is applied (or was: a duplicate).
//   Aborted      the receiver has no state for this stream (it restarted,
//                expired it, or a chunk came out of order): the sender
//                sends the set again, from a new snapshot.
//   Unavailable  the receiver cannot take it now (no replica of the
//                partition here, yet or any more): later, or never.
//   other        the receiver refused the chunk (a set of another
//                partition, a replica's error), as the replica said.
//
// Aborted is the one code that restarts a set, and the receiver's replica
// never returns it, so a replica's own error (FailedPrecondition of a
// closed replica, say) is never taken for a lost stream.

#ifndef BIGSET_LIB_CLUSTER_SET_STREAM_H_
#define BIGSET_LIB_CLUSTER_SET_STREAM_H_

#include <string_view>

#include "absl/status/status.h"
#include "core/string_view_compat.h"

namespace bigset {

inline absl::Status StreamStateLost(std::string_view why) {
  return absl::AbortedError(ToAbsl(why));
}
inline bool IsStreamStateLost(const absl::Status& s) {
  return absl::IsAborted(s);
}

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_SET_STREAM_H_
