// QueryCoordinator: the state machine of one membership (subset) query,
// outputs out (quorum_read_coordinator.h). Internal header.
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
#include "cluster/request_output.h"
#include "cluster/slow_replicas.h"
#include "net/message.h"

namespace bigset {

class QueryCoordinator final
    : public QuorumReadCoordinator<msg::QueryReply, Membership,
                                   RequestKind::kQuery> {
 public:
  QueryCoordinator(uint64_t id, std::string set, QuorumReadSetup setup,
                   std::vector<std::string> elements,
                   const ClusterReadOptions& options,
                   std::function<void(absl::StatusOr<Membership>)> done);
  // Asks the replicas: every one if no hedge is set, else R places first,
  // each with all its nodes: each place ranked by the slowest of its peers
  // that `slow` marks at `now`, the lowest first; among equals this node's
  // own place, then the serving list's order.
  RequestOutput Start(uint64_t now, const SlowReplicas& slow);
  // A replica's answer.
  RequestOutput Step(NodeId from, msg::QueryReply& m);

 private:
  std::string RequestBytes() const override;
  void OnTick(uint64_t now, RequestOutput* out) override;
  uint64_t DerivedTickAt() const override;
  // Asks the replicas not asked yet (ClusterReadOptions::query_hedge_micros):
  // the hedge ran out, or a reply cannot help.
  void AskTheRest(RequestOutput* out, bool hedge_ran_out);
  // Merges `replies` (R places' worth) and answers.
  void Answer(std::vector<std::pair<NodeId, msg::QueryReply*>> replies,
              RequestOutput* out);

  std::vector<std::string> elements_;
  // When the replicas not asked first are asked (in kAskingSome).
  uint64_t hedge_at_ = UINT64_MAX;
  // Once the hedge ran out: whom Start asked (by preference index).
  std::vector<bool> asked_first_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_QUERY_COORDINATOR_H_
