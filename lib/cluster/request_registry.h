// RequestRegistry: the coordinators of the client requests a node runs, by
// request id, and the routes from the ids of their sub-requests (a read's
// folds, a write's extra deltas) to them. Internal header.
//
// The node adds a coordinator when a request starts; the coordinator says
// when it is done (CoordinatorHost::Finish*), and replies find their
// coordinator here by request id. Finished write coordinators are kept
// idle, a few, and reused: a steady stream of writes allocates none.
//
// Thread-safety: not thread-safe (the node's thread).

#ifndef BIGSET_LIB_CLUSTER_REQUEST_REGISTRY_H_
#define BIGSET_LIB_CLUSTER_REQUEST_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "cluster/count_coordinator.h"
#include "cluster/query_coordinator.h"
#include "cluster/read_coordinator.h"
#include "cluster/write_coordinator.h"

namespace bigset {

class RequestRegistry {
 public:
  // A finished write coordinator to Reset for a new write; null if none is
  // kept.
  std::unique_ptr<WriteCoordinator> TakeIdleWrite();

  // Each takes the coordinator of request `id` and returns it.
  WriteCoordinator* AddWrite(uint64_t id, std::unique_ptr<WriteCoordinator> op);
  ReadCoordinator* AddRead(uint64_t id, std::unique_ptr<ReadCoordinator> op);
  QueryCoordinator* AddQuery(uint64_t id, std::unique_ptr<QueryCoordinator> op);
  CountCoordinator* AddCount(uint64_t id, std::unique_ptr<CountCoordinator> op);

  // Drops the coordinator of `id` (a write's is kept idle for reuse, up to
  // a few). Nothing if there is none.
  void FinishWrite(uint64_t id);
  void FinishRead(uint64_t id) { reads_.erase(id); }
  void FinishQuery(uint64_t id) { queries_.erase(id); }
  void FinishCount(uint64_t id) { counts_.erase(id); }

  // Sub-requests: a read's fold ids, a write's extra deltas' request ids.
  void RouteFold(uint64_t fold_id, uint64_t read_id) {
    fold_routes_[fold_id] = read_id;
  }
  void UnrouteFold(uint64_t fold_id) { fold_routes_.erase(fold_id); }
  void RouteWrite(uint64_t extra_id, uint64_t write_id) {
    write_routes_[extra_id] = write_id;
  }
  void UnrouteWrite(uint64_t extra_id) { write_routes_.erase(extra_id); }

  // The coordinator a reply is for, or null.
  WriteCoordinator* Write(uint64_t id);
  // The write of request id `id`: its own, or one of its extra deltas'.
  WriteCoordinator* WriteFor(uint64_t id);
  ReadCoordinator* ReadForFold(uint64_t fold_id);
  QueryCoordinator* Query(uint64_t id);
  CountCoordinator* Count(uint64_t id);

  bool writes_empty() const { return writes_.empty(); }
  // What is kept: running writes and the routes of their extra deltas
  // (both 0 once every write ended).
  size_t writes_running() const { return writes_.size(); }
  size_t write_routes() const { return write_routes_.size(); }
  size_t fold_routes() const { return fold_routes_.size(); }
  size_t idle_writes() const { return idle_writes_.size(); }
  // The ids of the running writes, ascending (so that a tick visits them in
  // a deterministic order).
  std::vector<uint64_t> WriteIds() const;

  // Drops every coordinator (the idle ones too) and route.
  void Clear();
  // The node is closing: takes every running coordinator out (so that the
  // callbacks may start or finish requests meanwhile), calls Abort(status)
  // on each in the order the requests started, then destroys them and
  // drops the routes and the idle writes.
  void AbortAll(const absl::Status& status);

 private:
  // Unordered for speed; WriteIds sorts.
  absl::flat_hash_map<uint64_t, std::unique_ptr<WriteCoordinator>> writes_;
  std::vector<std::unique_ptr<WriteCoordinator>> idle_writes_;
  std::map<uint64_t, std::unique_ptr<ReadCoordinator>> reads_;
  std::map<uint64_t, std::unique_ptr<QueryCoordinator>> queries_;
  std::map<uint64_t, std::unique_ptr<CountCoordinator>> counts_;
  absl::flat_hash_map<uint64_t, uint64_t> fold_routes_;   // fold -> read
  absl::flat_hash_map<uint64_t, uint64_t> write_routes_;  // extra -> write
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_REQUEST_REGISTRY_H_
