// MembershipAuthority: where a cluster's ring is decided, so that every node
// installs the same ring for every epoch.
//
// A ring change is a compare-and-swap on the epoch: Propose(next, E) records
// `next` only if the latest recorded epoch is still E; of two changes made
// at once from the same epoch, one wins and the other gets Aborted and
// starts again from the winner. Every node watches the authority and
// installs each record it is shown (Ring epochs only grow, so a record
// older than the node's ring is ignored by the node).
//
// The library does not depend on any implementation: an embedder who keeps
// cluster metadata in a consensus store (etcd, ZooKeeper, a Raft group of
// their own) implements this interface over it. bigset ships one over etcd
// (bigset/etcd/etcd_authority.h, in its own library).
//
// Thread-safety: implementations are thread-safe.

#ifndef BIGSET_INCLUDE_BIGSET_CLUSTER_MEMBERSHIP_AUTHORITY_H_
#define BIGSET_INCLUDE_BIGSET_CLUSTER_MEMBERSHIP_AUTHORITY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/export.h"

namespace bigset {

// One decided ring.
struct BIGSET_EXPORT MembershipRecord {
  // The ring's epoch (Ring::epoch()); > 0.
  uint64_t epoch = 0;
  // The embedder's description of the cluster at that epoch, opaque here:
  // at least the ring (Ring::Encode()), usually with the nodes' addresses.
  std::string map;
  // One line saying what change made it ("JOIN 4 by node 2"), shown to
  // whoever loses a race against it.
  std::string change;

  // A self-checking binary form (docs/FORMATS.md, "Membership record"):
  // Decode refuses any other bytes with DataLoss, never crashes.
  std::string Encode() const;
  static absl::StatusOr<MembershipRecord> Decode(std::string_view bytes);

  friend bool operator==(const MembershipRecord&,
                         const MembershipRecord&) = default;
};

class BIGSET_EXPORT MembershipAuthority {
 public:
  virtual ~MembershipAuthority() = default;

  // The latest record, or nullopt if none was ever recorded.
  // Unavailable when the authority cannot be reached.
  virtual absl::StatusOr<std::optional<MembershipRecord>> Latest() = 0;

  // Records `next` as the latest iff the latest recorded epoch is
  // `expected_epoch` (0: no record yet). REQUIRES: next.epoch >
  // expected_epoch. Returns:
  //   OK           recorded; every watcher will be shown it.
  //   Aborted      another record holds the latest epoch; its epoch and
  //                change are in the message. Nothing was recorded.
  //   Unavailable  the authority could not be reached; nothing recorded.
  //   DeadlineExceeded / Unknown  the request may or may not have been
  //                recorded (read Latest() to know).
  virtual absl::Status Propose(const MembershipRecord& next,
                               uint64_t expected_epoch) = 0;

  // Starts showing records to `on_record`, on a thread of the
  // authority's: the latest record (nullopt: none yet) each time the watch
  // is (re)established, then each newer record in epoch order as it is
  // recorded. While the authority cannot be reached it retries by itself
  // (with back-off) and shows nothing. Called at most once.
  // `on_record` may call Latest and Propose. A watch that may have gone
  // silent (a member frozen, a connection dead without a word) is checked
  // and moved to another member.
  using WatchCallback =
      std::function<void(const std::optional<MembershipRecord>&)>;
  virtual absl::Status Watch(WatchCallback on_record) = 0;

  // Ends the watch and cancels the requests in progress (they return
  // Cancelled, as does every later call): on return `on_record` is not
  // running and will not be called again. Idempotent; the destructor
  // calls it.
  virtual void Close() = 0;
};

}  // namespace bigset

#endif  // BIGSET_INCLUDE_BIGSET_CLUSTER_MEMBERSHIP_AUTHORITY_H_
