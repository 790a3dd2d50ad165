// Dispatcher: a table from message type to the handler of the protocol
// that owns it. Internal header.
//
// A node registers one handler per message type at construction (see
// Node::Impl::InstallRoutes), so that which protocol answers which message
// is one list, and a message nobody handles is an error at startup rather
// than a silent drop. Two kinds of handler:
//
//   - raw: the bulk of the traffic (replicated deltas, read chunks, their
//     acknowledgements), parsed by the handler from the body without a
//     struct; it returns false for a malformed body;
//   - typed: every other message, decoded into its struct (net/message.h)
//     first, which the handler gets with the header. A "bulk" type
//     (hand-off chunks, anti-entropy pushes) is decoded into one message
//     kept for the purpose, so that a stream of chunks reuses its element
//     storage; a nested Dispatch while such a handler runs decodes afresh.
//
// Thread-safety: not thread-safe (the node's thread).

#ifndef BIGSET_LIB_CLUSTER_DISPATCHER_H_
#define BIGSET_LIB_CLUSTER_DISPATCHER_H_

#include <array>
#include <functional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "net/message.h"

namespace bigset {

class Dispatcher {
 public:
  using RawHandler = std::function<bool(
      NodeId from, const MessageHeader& header, std::string_view body)>;
  template <typename Body>
  using TypedHandler =
      std::function<void(NodeId from, const MessageHeader& header, Body& body)>;

  // Registers the handler of `type`, or of Body::kType. REQUIRES: none
  // registered yet.
  void OnRaw(MessageType type, RawHandler handler);
  template <typename Body>
  void On(TypedHandler<Body> handler, bool bulk = false) {
    OnDecoded(
        Body::kType,
        [handler = std::move(handler)](NodeId from, Message& m) {
          handler(from, m.header, *m.As<Body>());
        },
        bulk);
  }

  // Registers `(owner->*handle)(from, header, body)` for Body's type: the
  // common route, a protocol's handler of one message. `owner` must
  // outlive the dispatcher's use.
  template <typename Owner, typename Body>
  void On(Owner* owner,
          void (Owner::*handle)(NodeId, const MessageHeader&, Body&),
          bool bulk = false) {
    On<std::remove_const_t<Body>>(
        [owner, handle](NodeId from, const MessageHeader& header,
                        std::remove_const_t<Body>& body) {
          (owner->*handle)(from, header, body);
        },
        bulk);
  }

  // Internal if some type has no handler (names the first).
  absl::Status CheckComplete() const;

  // Parses `bytes` and runs its type's handler. Returns false for
  // undecodable bytes (nothing is run then).
  bool Dispatch(NodeId from, std::string_view bytes);

 private:
  using Handler = std::function<void(NodeId from, Message& m)>;
  void OnDecoded(MessageType type, Handler handler, bool bulk);

  struct Route {
    RawHandler raw;
    Handler decoded;
    bool bulk = false;
  };
  Route& RouteOf(MessageType type);

  std::array<Route, kMaxMessageType + 1> routes_;
  Message bulk_;
  bool bulk_busy_ = false;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_DISPATCHER_H_
