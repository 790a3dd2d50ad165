// RequestIds: the request ids of one node, unique across its restarts.
// Internal header.
//
// Peers remember a node's request ids (reply caches, fences, hand-off
// runs), so an id must never repeat, not even after a crash. Ids come from a
// lease recorded in the store before any of it is used: Open reads the last
// lease's end (or, for a new store, draws a random one), skips what is left
// of it, and records the next lease with a synced write; Next records
// another when the lease runs out. The node and its protocols take ids from
// one RequestIds, so ids follow the order the requests are made in.
//
// Thread-safety: not thread-safe; used on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_REQUEST_IDS_H_
#define BIGSET_LIB_CLUSTER_REQUEST_IDS_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "bigset/net/transport.h"
#include "bigset/store/store.h"

namespace bigset {

class RequestIds {
 public:
  // `random_source` (not owned, may hold an empty function; must outlive
  // this) gives a new store's first lease: the simulator's seeded source,
  // or std::random_device when empty. It is called at most once, in Open.
  RequestIds(NodeId node, Store* store,
             const std::function<uint64_t()>* random_source);
  RequestIds(const RequestIds&) = delete;
  RequestIds& operator=(const RequestIds&) = delete;

  // Reads the lease, then records the next one. Returns DataLoss for an
  // undecodable lease and the store's error if it cannot record.
  // REQUIRES: called once, before Next.
  absl::Status Open();

  // An id no earlier Next of this store returned. If the store cannot
  // record a new lease, ids go on past the old one: they repeat only if the
  // node also restarts before a later lease is recorded.
  uint64_t Next();

  // The end of the current lease. Right after Open it differs from every
  // earlier open of the store: the node's incarnation.
  uint64_t lease_end() const { return lease_end_; }

 private:
  absl::Status Extend();

  const NodeId node_;
  Store* const store_;
  const std::function<uint64_t()>* const random_source_;
  uint64_t next_ = 1;
  // Ids below it are recorded as leased (synced).
  uint64_t lease_end_ = 1;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_REQUEST_IDS_H_
