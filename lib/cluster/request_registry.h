// RequestRegistry: the coordinators of the client requests a node runs, by
// request id, and the routes from the ids of their sub-requests (a read's
// folds, a write's extra deltas) to them. Internal header.
//
// The node adds a coordinator when a request starts; the coordinator says
// when it is done (Finish), and replies find their coordinator here by
// request id and kind: a reply of one kind never reaches a coordinator of
// another, even under a forged or stale id. Finished write coordinators
// are kept idle, a few, and reused: a steady stream of writes allocates
// none.
//
// The registry knows coordinators only by their base (coordinator.h);
// Find<T> needs T complete where it is called.
//
// Thread-safety: not thread-safe (the node's thread).

#ifndef BIGSET_LIB_CLUSTER_REQUEST_REGISTRY_H_
#define BIGSET_LIB_CLUSTER_REQUEST_REGISTRY_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "cluster/coordinator.h"

namespace bigset {

class WriteCoordinator;

class RequestRegistry {
 public:
  RequestRegistry();
  ~RequestRegistry();
  RequestRegistry(const RequestRegistry&) = delete;
  RequestRegistry& operator=(const RequestRegistry&) = delete;

  // A finished write coordinator to Reset for a new write; null if none is
  // kept.
  std::unique_ptr<WriteCoordinator> TakeIdleWrite();

  // Files `op` under its id and returns it. REQUIRES: no running request
  // has that id.
  template <typename T>
  T* Add(std::unique_ptr<T> op) {
    T* raw = op.get();
    Insert(std::move(op));
    return raw;
  }

  // Drops the coordinator of `id` (a write's is kept idle for reuse, up to
  // a few). Nothing if there is none.
  void Finish(uint64_t id);

  // The running coordinator of kind T::kKind with request id `id`, or null.
  template <typename T>
  T* Find(uint64_t id) const {
    return static_cast<T*>(FindKind(id, T::kKind));
  }
  // The coordinator (of kind T::kKind) sub-request `sub_id` is routed to
  // (Route), or null.
  template <typename T>
  T* FindByRoute(uint64_t sub_id) const {
    auto route = routes_.find(sub_id);
    return route == routes_.end() ? nullptr : Find<T>(route->second);
  }
  // Find, else FindByRoute: a write's acknowledgements name its own id or
  // one of its extra deltas'.
  template <typename T>
  T* FindOwnOrRouted(uint64_t id) const {
    if (T* own = Find<T>(id)) return own;
    return FindByRoute<T>(id);
  }

  // Sub-requests: a read's fold ids, a write's extra deltas' request ids,
  // each routed to the request that made it.
  void Route(uint64_t sub_id, uint64_t id) { routes_[sub_id] = id; }
  void Unroute(uint64_t sub_id) { routes_.erase(sub_id); }

  // Running coordinators of `kind`.
  size_t running(RequestKind kind) const {
    return running_by_kind_[static_cast<size_t>(kind)];
  }
  // Routes to running coordinators of `kind`, and routes to none (left
  // behind: 0 while every coordinator unroutes what it routed).
  size_t routes(RequestKind kind) const;
  size_t stale_routes() const;
  size_t idle_writes() const { return idle_writes_.size(); }
  // The ids of the running coordinators of `kind`, ascending (so that a
  // tick visits them in a deterministic order).
  std::vector<uint64_t> Ids(RequestKind kind) const;

  // Drops every coordinator (the idle ones too) and route.
  void Clear();
  // The node is closing: takes every running coordinator out (so that the
  // callbacks may start or finish requests meanwhile), calls Abort(status)
  // on each in the order the requests started, then destroys them and
  // drops the routes and the idle writes. `before`, if set, runs before
  // each Abort with that request's id, and last with UINT64_MAX (the node
  // gives the answers it holds for finished requests among them, in
  // order).
  void AbortAll(const absl::Status& status,
                const std::function<void(uint64_t)>& before = nullptr);

 private:
  void Insert(std::unique_ptr<Coordinator> op);
  Coordinator* FindKind(uint64_t id, RequestKind kind) const;

  absl::flat_hash_map<uint64_t, std::unique_ptr<Coordinator>> running_;
  std::array<size_t, kRequestKinds> running_by_kind_{};
  std::vector<std::unique_ptr<WriteCoordinator>> idle_writes_;
  absl::flat_hash_map<uint64_t, uint64_t> routes_;  // sub-request -> request
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_REQUEST_REGISTRY_H_
