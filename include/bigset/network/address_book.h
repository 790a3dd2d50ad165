// AddressBook: where each node of a cluster listens for its peers.
//
// The transport looks a peer up when it connects (and again at every
// reconnect), so an address changed at run time is used from the next
// connection on. A node missing from the book is not connected to; messages
// for it are dropped and counted.
//
// Thread-safety: thread-safe.

#ifndef BIGSET_NETWORK_ADDRESS_BOOK_H_
#define BIGSET_NETWORK_ADDRESS_BOOK_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "bigset/core/mutex.h"
#include "bigset/export.h"
#include "bigset/net/transport.h"

namespace bigset {

struct PeerAddress {
  std::string host;
  uint16_t port = 0;

  friend bool operator==(const PeerAddress&, const PeerAddress&) = default;
};

// Parses "host:port" (an IPv6 host in brackets: "[::1]:7000").
// InvalidArgument for anything else.
BIGSET_EXPORT absl::StatusOr<PeerAddress> ParsePeerAddress(
    std::string_view text);

class BIGSET_EXPORT AddressBook {
 public:
  void Set(NodeId node, PeerAddress address);
  void Remove(NodeId node);
  std::optional<PeerAddress> Lookup(NodeId node) const;
  std::map<NodeId, PeerAddress> All() const;

 private:
  mutable Mutex mu_;
  std::map<NodeId, PeerAddress> addresses_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bigset

#endif  // BIGSET_NETWORK_ADDRESS_BOOK_H_
