// CountCoordinator: the state machine of one cluster count (Node::Count).
// Internal header.
//
// Asks every replica of the set's serving list for its count and set digest
// (kCount; Replica::CountSummary, constant time) and takes the first R
// answers, with the quorum rules of a query (query_coordinator.h): with
// notfound_ok off, a replica without the set counts towards R only when
// every replica answered and fewer than R hold it. If the R replicas agree
// (equal set digests, which they keep for anti-entropy, and equal tombstone
// digests: the same element keys, clock and tombstone; or none of them
// holds the set), they hold the same elements and their count is the
// answer: what a merged read would count. Otherwise `done`
// gets nullopt, and the node counts with a merged read of the set instead
// (docs/DESIGN.md, "Counts").
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_COUNT_COORDINATOR_H_
#define BIGSET_LIB_CLUSTER_COUNT_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/coordinator_host.h"
#include "net/message.h"

namespace bigset {

class CountCoordinator : public Coordinator {
 public:
  // `done` gets the agreed count, nullopt if the replicas differ, or an
  // error (fewer than R replicas answered in time).
  CountCoordinator(
      CoordinatorHost* host, uint64_t id, std::string set,
      const ClusterReadOptions& options,
      std::function<void(absl::StatusOr<std::optional<uint64_t>>)> done);
  void Start();
  void Abort(const absl::Status& status) override;
  void OnReply(NodeId from, const msg::CountReply& m);

 private:
  void ScheduleTimer();
  void OnTimer();
  std::string CountBytes() const;
  void Answer(const std::vector<const msg::CountReply*>& replies);
  void Finish(absl::StatusOr<std::optional<uint64_t>> result);

  const std::string set_;
  const uint32_t partition_;
  const ClusterReadOptions options_;
  std::function<void(absl::StatusOr<std::optional<uint64_t>>)> done_;
  std::vector<NodeId> preference_;
  // Replies: found (count towards R), not found (with notfound_ok off),
  // in arrival order.
  std::map<NodeId, msg::CountReply> found_;
  std::map<NodeId, msg::CountReply> not_found_;
  std::vector<NodeId> found_order_;
  std::set<NodeId> failed_;
  uint64_t deadline_ = 0;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_COUNT_COORDINATOR_H_
