// QueryCoordinator: the state machine of one membership (subset) query.
// Internal header.
//
// Asks the replicas of the set's serving list (every one, or R places of
// them first: ClusterReadOptions::query_hedge_micros) for the elements'
// dots and the clock of the same snapshot; merges the first R places' answers
// (place_quorum.h: a leaver and the node that took its place are one place,
// counted once both answered) with the ORSWOT join (ReadMerger) and repairs
// the differences. With notfound_ok off, a replica without the set does not
// count towards R unless every replica has answered and fewer than R places
// hold the set (then the empty ones make up the quorum, as for reads).
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_QUERY_COORDINATOR_H_
#define BIGSET_LIB_CLUSTER_QUERY_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/coordinator_host.h"
#include "cluster/place_quorum.h"
#include "net/message.h"

namespace bigset {

class QueryCoordinator : public Coordinator {
 public:
  QueryCoordinator(CoordinatorHost* host, uint64_t id, std::string set,
                   std::vector<std::string> elements,
                   const ClusterReadOptions& options,
                   std::function<void(absl::StatusOr<Membership>)> done);
  void Start();
  void Abort(const absl::Status& status) override;
  void OnReply(NodeId from, msg::QueryReply& m);

 private:
  void ScheduleTimer();
  void OnTimer();
  // Asks the replicas not asked yet (ClusterReadOptions::query_hedge_micros).
  void AskTheRest();
  std::string QueryBytes() const;
  // Merges `replies` (R places' worth) and answers the client.
  void Answer(std::vector<std::pair<NodeId, msg::QueryReply*>> replies);
  void Finish(absl::StatusOr<Membership> result);

  const std::string set_;
  const uint32_t partition_;
  std::vector<std::string> elements_;
  const ClusterReadOptions options_;
  std::function<void(absl::StatusOr<Membership>)> done_;
  std::vector<NodeId> preference_;
  std::vector<uint32_t> places_;  // The place of each preference_ node.
  // By preference index: what each node answered, and its reply.
  std::vector<QuorumReply> kinds_;
  std::vector<msg::QueryReply> replies_;
  std::vector<size_t> order_;  // Indices, in the order they answered.
  std::vector<bool> asked_;    // By preference index.
  uint64_t deadline_ = 0;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_QUERY_COORDINATOR_H_
