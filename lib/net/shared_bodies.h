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

// The place the node that applied a delta serves the partition in: the
// node whose place it took and that node's episode (its membership entry's
// took_from and took_since), or none (`from` 0: an original member). A
// coordinator whose view of the partition lags may list that node and the
// one whose place it took as two places; this tells it they are one.
struct PlaceTaken {
  NodeId from = 0;
  uint64_t since = 0;

  friend bool operator==(const PlaceTaken&, const PlaceTaken&) = default;
};

// The outcome of applying a delta, the node that applied it (the receiver,
// or the node it passed the delta on to), so that the sender counts each
// replica once, and the place that node took, if any.
template <MessageType T>
struct AppliedBody {
  static constexpr MessageType kType = T;
  absl::Status status;
  NodeId applied_by = 0;
  PlaceTaken taken;

  friend bool operator==(const AppliedBody&, const AppliedBody&) = default;

  template <typename Ar, typename Self>
  static bool Fields(Ar& ar, Self& m) {
    return Fields(ar, m.status, m.applied_by, m.taken);
  }
  // The same fields apart, for the hot path (EncodeStatusReply,
  // ParseStatusBody). The place comes last and only when there is one
  // (`from` not 0), so that an original member's acknowledgement keeps
  // the bytes it always had.
  template <typename Ar, typename S, typename N, typename P>
  static bool Fields(Ar& ar, S& status, N& applied_by, P& taken) {
    if (!ar.Status(status) || !ar.Node(applied_by)) return false;
    if constexpr (Ar::kReading) {
      if (ar.empty()) {
        taken = PlaceTaken();
        return true;
      }
      return ar.Node(taken.from) && ar.Varint(taken.since) && taken.from != 0;
    } else {
      if (taken.from == 0) return true;
      return ar.Node(taken.from) && ar.Varint(taken.since);
    }
  }
};

}  // namespace msg
}  // namespace bigset

#endif  // BIGSET_LIB_NET_SHARED_BODIES_H_
