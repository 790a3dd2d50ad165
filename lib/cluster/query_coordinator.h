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
#include "cluster/quorum_read_coordinator.h"
#include "net/message.h"

namespace bigset {

class QueryCoordinator final
    : public QuorumReadCoordinator<msg::QueryReply, Membership> {
 public:
  static constexpr RequestKind kKind = RequestKind::kQuery;
  RequestKind kind() const override { return kKind; }

  QueryCoordinator(CoordinatorHost* host, uint64_t id, std::string set,
                   std::vector<std::string> elements,
                   const ClusterReadOptions& options,
                   std::function<void(absl::StatusOr<Membership>)> done);
  void Start();
  void OnReply(NodeId from, msg::QueryReply& m);

 private:
  std::string RequestBytes() const override;
  void Release() override;
  // Asks the replicas not asked yet (ClusterReadOptions::query_hedge_micros).
  void AskTheRest();
  // Merges `replies` (R places' worth) and answers the client.
  void Answer(std::vector<std::pair<NodeId, msg::QueryReply*>> replies);

  std::vector<std::string> elements_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_QUERY_COORDINATOR_H_
