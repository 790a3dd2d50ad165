// MembershipState: which nodes serve each partition, as this node knows it.
// Internal header (docs/ARCHITECTURE.md, "Membership").
//
// Every node is the only author of its own membership state (NodeServing in
// net/message.h): a version it raises on every change, and the partitions it
// serves, each with the episode in which it began serving it, the node whose
// place it took, and the node it hands the partition over to. Nodes gossip
// their states (kMembership); of two states of one node the one with the
// higher version wins. Views are maps of single-writer registers, so they
// converge whatever the order in which states arrive, late, twice or not
// at all, and across restarts: no notice, once lost, leaves a node behind.
//
// The serving list of a partition is every node whose state lists it: the
// latest ring's nodes first in its order, then the others by id. A node this
// node has never heard of is taken to serve what the base ring (the ring
// this store was first opened with) gives it; every node of that ring
// began with that placement as its own state, so the guess holds until the
// node changes it, and then its state is gossiped. A joiner (opened with a
// ring that leaves it out) cannot tell which nodes of its ring began with
// it (one may have been only receiving then, and later taken another's
// place): its guesses count as one place until their states arrive.
//
// Own changes are persisted with a synced write before they are used (a
// node's account of itself must survive a power loss); other nodes' states
// without sync (gossip brings them again).
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_MEMBERSHIP_H_
#define BIGSET_LIB_CLUSTER_MEMBERSHIP_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "bigset/cluster/ring.h"
#include "bigset/store/store.h"
#include "net/message.h"

namespace bigset {

// Whether `list` (a serving list, a ring's nodes) holds `n`.
inline bool Contains(const std::vector<NodeId>& list, NodeId n) {
  return std::find(list.begin(), list.end(), n) != list.end();
}

class MembershipState {
 public:
  // REQUIRES: `store` outlives this.
  MembershipState(NodeId self, Store* store);

  // Loads the persisted state. A new store starts with `ring` as its base
  // and latest ring, and this node serving what `ring` gives it, under
  // version (and episode) `first_version`: a number no earlier store of
  // this node id used (see HandoffManager::Load). A store
  // that has seen a later ring than `ring`: FailedPrecondition; the same
  // epoch with another ring: InvalidArgument. A store written by an earlier
  // format (serving lists instead of states) is converted.
  absl::Status Load(const Ring& ring, uint64_t first_version = 1);

  NodeId self() const { return self_; }
  const Ring& ring() const { return *latest_; }
  const Ring& base_ring() const { return *base_; }
  // InvalidArgument for a ring of another size or another n,
  // FailedPrecondition for an epoch not above the latest. Persisted (synced).
  absl::Status InstallRing(const Ring& ring);

  // The nodes that serve `partition` in this node's view.
  const std::vector<NodeId>& ServingList(uint32_t partition) const {
    return serving_[partition];
  }
  // The place of each node of ServingList(partition), by index: a node
  // that took the place of another node of the list (in that node's
  // current episode, directly or through nodes that handed the place on)
  // shares its place; a node whose chain this view cannot follow shares
  // the place of every leaver of the list; every other node has a place of
  // its own. A place is named
  // by the smallest index of its nodes. While a partition moves, a leaver and
  // the node that took its place both serve it, and together they hold one
  // place's writes: quorums count places, not nodes (docs/DESIGN.md, "Places").
  const std::vector<uint32_t>& ServingPlaces(uint32_t partition) const {
    return places_[partition];
  }
  // Changes at every change of the view (a ring, a state heard, an own
  // change), never at a version raise alone: what derives from the view
  // is derived again when it moved.
  uint64_t generation() const { return generation_; }
  // Partitions whose serving list holds other nodes than the latest ring's.
  size_t PartitionsMoving() const { return moving_; }
  bool Moving(uint32_t partition) const;

  // This node's own state, and its entry for `partition` (nullptr: it does
  // not serve it).
  const NodeServing& own() const { return states_.at(self_); }
  const ServeEntry* Own(uint32_t partition) const;
  bool Serves(uint32_t partition) const { return Own(partition) != nullptr; }
  // Another node's entry for `partition` in this view (nullptr: it does
  // not serve it; a node never heard of serves by the base ring, with
  // episode 0).
  std::optional<ServeEntry> EntryOf(NodeId node, uint32_t partition) const;
  // Whether another node took this node's place in its current episode of
  // serving `partition`: `node` took it, and `holder` holds it now (the
  // place may have been handed on since; 0 if this view does not know
  // where it went yet).
  struct Taker {
    NodeId node = 0;
    NodeId holder = 0;
  };
  std::optional<Taker> ReplacedBy(uint32_t partition) const;
  // The nodes a node that took `from`'s place (its episode `since`) is one
  // place with, for a write coordinator whose list came from an earlier
  // view (a node it lists may have left and since taken the place of
  // another it lists): `from`, the node whose place `from` took in that
  // episode, and so on as far as this view follows the chain (at most
  // kMaxGivers). A node this view knows to serve `partition` in another
  // episode than the chain's is left out (it left and came back: another
  // place); one it only guesses at (episode 0) is kept: grouping two
  // places as one only costs availability. Empty if `from` is 0.
  static constexpr size_t kMaxGivers = 8;
  std::vector<NodeId> PlaceGivers(uint32_t partition, NodeId from,
                                  uint64_t since) const;
  // Whether a node took `node`'s place in its current episode of serving
  // `partition` (in this view).
  bool Replaced(NodeId node, uint32_t partition) const;
  // Whether another node took the place `node` took in its current episode
  // of serving `partition`: the giver handed it out twice (it gave up on a
  // taker that had accepted but stayed cut off, and handed the place to
  // another). The node that holds that twin place now (it may have handed
  // it on), or 0 if there is none or this view does not know it.
  NodeId TwinHolder(NodeId node, uint32_t partition) const;
  // Whether some node serving `partition` hands it over to `node`.
  bool Claimed(uint32_t partition, NodeId node) const;
  // Drops this node's departed entries nobody needs any more: the node
  // whose place each took no longer serves that episode, nor follows the
  // place through a departed entry of its own that is still needed.
  absl::Status PruneDeparted();

  // Own changes, persisted with a synced write; on failure nothing
  // changes. BeginServing: this node takes `took_from`'s place (episode
  // `took_since`), or serves without taking one (0).
  absl::Status BeginServing(uint32_t partition, NodeId took_from,
                            uint64_t took_since);
  absl::Status SetHandingTo(uint32_t partition, NodeId to);
  absl::Status StopServing(uint32_t partition);

  // A synced write of the metadata: every write before it is durable.
  absl::Status Sync() { return Persist(/*sync=*/true); }

  // Merges states heard from another node; true if the view changed.
  // States of this node itself with a version at or above its own (its
  // store was replaced and others remember more) raise its version above
  // theirs (*own_raised), keeping its content: a node is the authority on
  // itself. Persisted (without sync) when something changed. States that
  // cannot be this cluster's (a partition past the ring; this node's own
  // above kMaxOwnVersion) are ignored and counted in *refused.
  bool Merge(const std::vector<NodeServing>& states, bool* own_raised,
             size_t* refused = nullptr);

  // The highest version of this node's own state that it outranks by
  // raising its own: above it, a raise would leave no room for its later
  // changes (and past 2^64 it would wrap to a version everyone ignores).
  // No node makes 2^32 changes, let alone 2^64 - 2^32.
  static constexpr uint64_t kMaxOwnVersion = UINT64_MAX - (uint64_t{1} << 32);

  // (node, version) of every state known, this node's included.
  std::vector<std::pair<NodeId, uint64_t>> Versions() const;
  // The states this node knows at a higher version than `versions` says
  // (or that `versions` does not name).
  std::vector<NodeServing> NewerThan(
      const std::vector<std::pair<NodeId, uint64_t>>& versions) const;
  // Whether `versions` names a higher version of some node than known here.
  bool Behind(const std::vector<std::pair<NodeId, uint64_t>>& versions) const;
  const NodeServing* StateOf(NodeId node) const;
  // Every node this node may need to tell about membership: the nodes of
  // the base and latest rings, of every ring installed, and of every
  // state known; without this node.
  std::vector<NodeId> Peers() const;

 private:
  absl::Status LoadOldFormat(const std::string& serving_bytes);
  // Rebuilds the serving lists and the count of moving partitions.
  void Rebuild();
  // ServingPlaces for `list`, the serving list of `partition`.
  std::vector<uint32_t> PlacesOf(uint32_t partition,
                                 const std::vector<NodeId>& list) const;
  // `node`'s entry (live or departed) of its episode `since` of serving
  // `partition`, if this view knows it.
  const ServeEntry* EpisodeOf(NodeId node, uint32_t partition,
                              uint64_t since) const;
  // Writes everything (the own state synced if `sync`), in one batch with
  // what `batch` already holds (if given).
  absl::Status Persist(bool sync, WriteBatch* batch = nullptr);
  // Applies `change` to a copy of the own state, persists it synced, and
  // only then makes it current.
  template <typename Fn>
  absl::Status ChangeOwn(Fn change);
  bool NodeServes(NodeId node, uint32_t partition) const;
  // Where the place `from` served in its episode `since` went: the node
  // that took it (other than `skip`) and the node holding it now (0 if
  // this view does not know); nullopt if nobody took it.
  std::optional<Taker> Follow(uint32_t partition, NodeId from, uint64_t since,
                              NodeId skip) const;
  // The node holding now the place `node` left in its episode `since` (0:
  // this view does not know), following chains up to `depth` steps.
  NodeId HolderAfter(uint32_t partition, NodeId node, uint64_t since,
                     size_t depth) const;

  // Whether this node is one of the base ring's: then the base ring is the
  // one every node of it began with, and each guess from it is its own
  // place; a joiner's guesses share one place (PlacesOf).
  bool GuessesFromBase() const;

  const NodeId self_;
  Store* const store_;
  std::optional<Ring> base_;
  std::optional<Ring> latest_;
  std::map<NodeId, NodeServing> states_;
  // Nodes of every ring installed (persisted with the states).
  std::set<NodeId> ring_nodes_;
  std::vector<std::vector<NodeId>> serving_;   // By partition.
  std::vector<std::vector<uint32_t>> places_;  // By partition, as serving_.
  std::vector<bool> moving_by_partition_;
  size_t moving_ = 0;
  uint64_t generation_ = 0;
};

// The self-checking encoding of node states in metadata
// (docs/FORMATS.md, "Node metadata"), and its decoder: DataLoss for bytes
// that are not one.
std::string EncodeMembershipRecord(const std::set<NodeId>& ring_nodes,
                                   const std::map<NodeId, NodeServing>& states);
absl::Status DecodeMembershipRecord(std::string_view bytes,
                                    std::set<NodeId>* ring_nodes,
                                    std::map<NodeId, NodeServing>* states);

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_MEMBERSHIP_H_
