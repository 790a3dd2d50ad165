// ClusterMap: what a bigsetd node knows of its cluster: the latest ring and
// where every node listens (for peers, and for clients: nodes reach each
// other's client ports to spread membership changes).
//
// Kept in the data directory (file "CLUSTER"), written whole to a temporary
// file, synced and renamed over the old one, so that a crash leaves the old
// map or the new one. The text form (docs/FORMATS.md, "bigsetd cluster
// map") ends with a checksum; Decode refuses anything else with DataLoss.
//
// Thread-safety: value type.

#ifndef BIGSET_TOOLS_BIGSETD_CLUSTER_MAP_H_
#define BIGSET_TOOLS_BIGSETD_CLUSTER_MAP_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "bigset/cluster/ring.h"
#include "bigset/network/address_book.h"

namespace bigset::server {

struct NodeAddresses {
  PeerAddress peer;
  std::optional<PeerAddress> client;
  friend bool operator==(const NodeAddresses&, const NodeAddresses&) = default;
};

struct ClusterMap {
  Ring ring;
  // Every node the ring holds, and nodes that left it but may still hand
  // off what they hold.
  std::map<NodeId, NodeAddresses> nodes;

  std::string Encode() const;
  static absl::StatusOr<ClusterMap> Decode(std::string_view text);

  // The map in `dir` (NotFound if there is none), and its atomic
  // replacement.
  static absl::StatusOr<ClusterMap> Load(const std::string& dir);
  absl::Status Save(const std::string& dir) const;
};

// "HOST:PORT" (IPv6 hosts in brackets).
std::string FormatAddress(const PeerAddress& address);

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_CLUSTER_MAP_H_
