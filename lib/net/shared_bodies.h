// The bodies several message types share: one template per shape, one
// type per message (the variant of bodies tells them apart by type).
// Internal header; see net/message_archive.h for Fields.
//
// Thread-safety: value types.

#ifndef BIGSET_LIB_NET_SHARED_BODIES_H_
#define BIGSET_LIB_NET_SHARED_BODIES_H_

#include "absl/status/status.h"
#include "bigset/core/delta.h"
#include "bigset/net/transport.h"
#include "net/message_type.h"

namespace bigset {
namespace msg {

// No fields.
template <MessageType T>
struct EmptyBody {
  static constexpr MessageType kType = T;

  friend bool operator==(const EmptyBody&, const EmptyBody&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar&, Self&) {
    return true;
  }
};

// One delta. The hot path encodes and parses it without a struct
// (EncodeDeltaMessage, ParseDeltaBody).
template <MessageType T>
struct DeltaBody {
  static constexpr MessageType kType = T;
  Delta delta;

  friend bool operator==(const DeltaBody&, const DeltaBody&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return ar.Delta(m.delta);
  }
};

// The outcome of applying a delta, and the node that applied it (the
// receiver, or the node it passed the delta on to), so that the sender
// counts each replica once.
template <MessageType T>
struct AppliedBody {
  static constexpr MessageType kType = T;
  absl::Status status;
  NodeId applied_by = 0;

  friend bool operator==(const AppliedBody&, const AppliedBody&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return Fields(ar, m.status, m.applied_by);
  }
  // The same fields apart, for the hot path (EncodeStatusReply,
  // ParseStatusBody).
  template <typename Ar, typename S, typename N>
  static bool Fields(Ar& ar, S& status, N& applied_by) {
    return ar.Status(status) && ar.Node(applied_by);
  }
};

}  // namespace msg
}  // namespace bigset

#endif  // BIGSET_LIB_NET_SHARED_BODIES_H_
