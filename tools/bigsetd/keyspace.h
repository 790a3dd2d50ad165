// Keyspace: the commands over every key of the cluster (DBSIZE, SCAN, KEYS,
// RANDOMKEY, FLUSHDB/FLUSHALL) need the names of its sets. No node holds
// them all when the ring has more nodes than replicas per partition, so a
// listing asks every node for the names its own replicas hold
// (BIGSET.LOCALSETS, one page at a time), merges the pages in name order,
// and keeps the names whose set a read quorum finds non-empty (a cleared
// set keeps its clock, and so its name, until it is swept).
//
// A node that does not answer within the read timeout is left out of the
// listing (and not asked again by the same walk): a set that a write
// quorum acknowledged is on at least W nodes, so it still shows unless W
// nodes are unreachable. Each node answers BIGSET.LOCALSETS on a thread of
// its own, so walks running on several nodes at once do not wait for each
// other. The listing is not a snapshot: sets
// created or emptied while it runs may or may not show.
//
// Cost: one round of page requests per `limit` names, plus one quorum count
// per name (constant time when the replicas agree).
//
// Thread-safety: every call blocks (the node, other nodes): call it on a
// worker thread, never on the server's or the node's.

#ifndef BIGSET_TOOLS_BIGSETD_KEYSPACE_H_
#define BIGSET_TOOLS_BIGSETD_KEYSPACE_H_

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/network/node_runner.h"
#include "cluster_map.h"

namespace bigset::server {

// The names of the sets this node's replicas hold (emptied ones too),
// ascending, after `after` (all if absent), at most `limit`.
absl::StatusOr<std::vector<std::string>> LocalSetNames(
    NodeRunner* runner, const std::optional<std::string>& after, size_t limit);

// BIGSET.LOCALSETS's reply: each name as its length in decimal, ':', and
// its bytes.
std::string EncodeSetNames(const std::vector<std::string>& names);
absl::StatusOr<std::vector<std::string>> DecodeSetNames(std::string_view text);

class Keyspace {
 public:
  // `nodes`: the cluster map's nodes (their client addresses are asked);
  // `self` is listed locally. `password`: the other nodes' requirepass.
  Keyspace(NodeRunner* runner, std::map<NodeId, NodeAddresses> nodes,
           NodeId self, std::string password, ClusterReadOptions read,
           ClusterWriteOptions write);

  struct Page {
    std::vector<std::string> names;  // Non-empty sets, ascending.
    // The last name the page covered (to pass as `after`), and whether
    // names may follow it.
    std::string last;
    bool more = false;
  };
  // The non-empty sets among the next `limit` names after `after`.
  absl::StatusOr<Page> Next(const std::optional<std::string>& after,
                            size_t limit);
  // Calls `fn` with every non-empty set, in name order; stops at its first
  // error (or at fn's).
  absl::Status ForEach(
      const std::function<absl::Status(const std::string&)>& fn);

  absl::StatusOr<uint64_t> Count(const std::string& set);
  // Clears `set` as a read quorum sees it: true if it held elements.
  absl::StatusOr<bool> Clear(const std::string& set);

 private:
  NodeRunner* runner_;
  std::map<NodeId, NodeAddresses> nodes_;
  NodeId self_;
  std::string password_;
  // Nodes that did not answer a page of this walk: later pages skip them.
  std::set<NodeId> unreachable_;
  ClusterReadOptions read_;
  ClusterWriteOptions write_;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_KEYSPACE_H_
