// CountCoordinator: the state machine of one cluster count (Node::Count).
// Internal header.
//
// Asks every replica of the set's serving list for its count and set digest
// (kCount; Replica::CountSummary, constant time) and takes the first R
// places' answers, with the quorum rules of a query (query_coordinator.h,
// place_quorum.h: a leaver and the node that took its place are one
// place, counted once both answered, and both must agree): with
// notfound_ok off, a replica without the set counts towards R only when
// every replica answered and fewer than R places hold it. If the R replicas
// agree (equal set digests, which they keep for anti-entropy, and equal
// tombstone digests: the same element keys, clock and tombstone; or none of
// them holds the set), they hold the same elements and their count is the
// answer: what a merged read would count. Otherwise `done`
// gets nullopt, and the node counts with a merged read of the set instead
// (docs/DESIGN.md, "Counts").
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_COUNT_COORDINATOR_H_
#define BIGSET_LIB_CLUSTER_COUNT_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/coordinator_host.h"
#include "cluster/place_quorum.h"
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
  std::vector<uint32_t> places_;  // The place of each preference_ node.
  // By preference index: what each node answered, and its reply.
  std::vector<QuorumReply> kinds_;
  std::vector<msg::CountReply> replies_;
  std::vector<size_t> order_;  // Indices, in the order they answered.
  uint64_t deadline_ = 0;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_COUNT_COORDINATOR_H_
