// ClusterMembership: bigsetd's membership authority, spread over its nodes.
//
// Each node keeps the latest ClusterMap it knows (in its data directory).
// An operator's change (BIGSET.CLUSTER JOIN / LEAVE / REPLACE, sent to any
// node) computes the next ring (epoch + 1), installs it on that node (the
// map is saved before the ring is installed, so a crash between the two
// reopens with the newer ring), then pushes the map to every other node's
// client port (BIGSET.CLUSTER INSTALL). A node that missed the push hears
// of the higher epoch from a peer's message (HandoffOptions::on_stale_ring)
// and fetches the map from that peer (BIGSET.CLUSTER GET), so a node that
// was down catches up by itself.
//
// Changes are meant to be issued one at a time; two different maps of the
// same epoch are refused by every node that has one of them (the operator
// then issues the next change on top of the one that won).
//
// With a MembershipAuthority (--membership etcd), the authority decides
// instead: a change is proposed there as the next epoch of the latest ring
// it holds (a compare-and-swap), retried on top of a change that won the
// race, and every node installs what the authority's watch shows it; no
// push. When the authority cannot be reached, changes wait a while and then
// fail, and the node goes on with the ring it has. A node whose ring is
// newer than the authority's (or that finds it empty: a new cluster, a
// wiped etcd) records the newest ring that a majority of the ring's nodes
// know (it asks them), never a ring it alone remembers. A record that
// places this node at another peer address belongs to another cluster
// (the same prefix by mistake) and is refused.
//
// Thread-safety: thread-safe. Change and Install block (disk, the node's
// thread, other nodes): call them from a worker, never from the server's
// or the node's thread. OnStaleRing may be called from any thread.

#ifndef BIGSET_TOOLS_BIGSETD_MEMBERSHIP_H_
#define BIGSET_TOOLS_BIGSETD_MEMBERSHIP_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bigset/cluster/membership_authority.h"
#include "bigset/network/node_runner.h"
#include "cluster_map.h"
#include "log.h"
#include "worker.h"

namespace bigset::server {

class ClusterMembership {
 public:
  // REQUIRES: `book` and `log` outlive the object. `authority` may be
  // null (the built-in way).
  ClusterMembership(ClusterMap map, NodeId self, std::string data_dir,
                    std::string password, AddressBook* book, Logger* log,
                    std::unique_ptr<MembershipAuthority> authority = nullptr);
  ~ClusterMembership();

  // The node, once it runs (before: changes fail with Unavailable). Saves
  // the current map first (the one the node starts with; the map passed
  // to the constructor may add this node's addresses), and attaches only
  // if that worked. The save holds the lock every install takes: a peer
  // may report a newer epoch as soon as the node runs, and the map its
  // fetch installs must neither be saved at the same time (the two would
  // share the temporary file) nor be overwritten by the older one.
  // REQUIRES: `runner` outlives the object, or Detach first.
  absl::Status Attach(NodeRunner* runner);
  // Changes fail with Unavailable again; the authority's watch stops.
  void Detach();

  // Whether an authority decides ring changes (INSTALL is then refused).
  bool has_authority() const { return authority_ != nullptr; }

  ClusterMap Current() const;

  // Installs `map` if its epoch is higher than the current one (saves it,
  // adds its addresses to the address book, installs its ring). The same
  // map again is OK; a lower epoch is FailedPrecondition, another map of
  // the same epoch Aborted.
  absl::Status Install(const ClusterMap& map);

  enum class ChangeKind { kJoin, kLeave, kReplace };
  struct Change {
    ChangeKind kind;
    NodeId node = 0;          // Joins, leaves, or is replaced.
    NodeId replacement = 0;   // kReplace: the node that takes its place.
    NodeAddresses addresses;  // Of the joining or replacing node.
    // Skips the handshake checks of a join or replacement (see Apply).
    bool force = false;
  };
  // Applies `change` to the current map, installs the result here and
  // pushes it to the other nodes. Returns one line per node on how the
  // push went (a node that could not be reached catches up later).
  // A join or replacement (unless `force`) first checks that this node
  // completes the peer handshake with the new node and the new node with
  // this node (asked through its client port): FailedPrecondition naming
  // the pair and the reason otherwise (nothing changed). The new node's
  // handshakes with the other nodes of the ring are tried too; failures
  // are warnings in the report (a member down or frozen must not stop a
  // join).
  absl::StatusOr<std::vector<std::string>> Apply(const Change& change);

  // A peer runs a ring with a higher epoch: fetch its map (in the
  // background, one fetch at a time; a failed fetch is tried again when
  // the node reports the epoch again).
  void OnStaleRing(uint64_t epoch, NodeId from);

  // The authority shows its latest record (nullopt: it has none): install
  // it, or record this node's ring if the authority's is older. Called on
  // the authority's watch thread.
  void OnAuthorityRecord(const std::optional<MembershipRecord>& record);

  // BIGSET.CLUSTER PROBE: connects to each of `peers` (adding their
  // addresses to the address book) and waits a few seconds for the
  // handshakes; one line per peer, "node ID ADDRESS: ok" or the reason.
  absl::StatusOr<std::vector<std::string>> Probe(
      const std::vector<std::pair<NodeId, PeerAddress>>& peers);

  // Fetches the map `address` (a node's client port) has.
  static absl::StatusOr<ClusterMap> Fetch(const PeerAddress& address,
                                          const std::string& password);

 private:
  // Dials each of `peers` (this node skipped) and waits for their
  // handshakes, up to a few seconds: the peers that did not complete one,
  // with the reason.
  std::map<NodeId, std::string> Handshakes(
      const std::vector<std::pair<NodeId, PeerAddress>>& peers);
  // The checks of Apply for `node` (joining, or replacing `replaced`, which
  // is not tried) at `addresses`, with the ring of `map`.
  // Handshakes that failed with other nodes of the ring are added to
  // *notes (reported, not refused).
  absl::Status CheckHandshakes(NodeId node, NodeId replaced,
                               const NodeAddresses& addresses,
                               const ClusterMap& map,
                               std::vector<std::string>* notes);
  absl::Status InstallLocked(const ClusterMap& map)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `base` with `change` applied, at the next epoch.
  static absl::StatusOr<ClusterMap> Next(const ClusterMap& base,
                                         const Change& change);
  // One line naming the change, stored with the ring it makes.
  std::string Describe(const Change& change) const;
  // Apply once the checks passed.
  absl::StatusOr<std::vector<std::string>> ApplyChecked(const Change& change);
  absl::StatusOr<std::vector<std::string>> ApplyThroughAuthority(
      const Change& change);
  // Records in the authority (which holds `authority_epoch`, 0: nothing)
  // the newest ring a majority of the ring's nodes know, asking them; on
  // the fetcher's thread, retried until done or another node did it.
  void SeedAuthority(uint64_t authority_epoch);
  // The authority's latest map (nullopt: none yet) and its epoch, retried
  // while the authority cannot be reached, up to `deadline`.
  absl::StatusOr<std::optional<MembershipRecord>> AuthorityLatest(
      absl::Time deadline);

  const std::unique_ptr<MembershipAuthority> authority_;
  const NodeId self_;
  const std::string data_dir_;
  const std::string password_;
  AddressBook* const book_;
  Logger* const log_;
  mutable absl::Mutex mu_;
  ClusterMap map_ ABSL_GUARDED_BY(mu_);
  NodeRunner* runner_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // A SeedAuthority is queued or running (one at a time).
  std::atomic<bool> seeding_{false};
  // Last: their threads must stop before the rest goes.
  std::unique_ptr<Worker> fetcher_;
  std::unique_ptr<Worker> seeder_;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_MEMBERSHIP_H_
