// QueryCoordinator: the state machine of one membership (subset) query.
// Internal header.
//
// Asks every replica of the set's preference list for the elements' dots
// and the clock of the same snapshot; merges the first R answers with the
// ORSWOT join (ReadMerger) and repairs the differences. With notfound_ok
// off, a replica without the set does not count towards R unless every
// replica has answered and fewer than R hold the set (then the empty ones
// make up the quorum, as for reads).
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_QUERY_COORDINATOR_H_
#define BIGSET_LIB_CLUSTER_QUERY_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cluster/coordinator_host.h"
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
  std::string QueryBytes() const;
  // Merges `replies` (R of them) and answers the client.
  void Answer(std::vector<std::pair<NodeId, msg::QueryReply*>> replies);
  void Finish(absl::StatusOr<Membership> result);

  const std::string set_;
  const uint32_t partition_;
  std::vector<std::string> elements_;
  const ClusterReadOptions options_;
  std::function<void(absl::StatusOr<Membership>)> done_;
  std::vector<NodeId> preference_;
  // Replies in arrival order: found (count towards R), and not found
  // (empty clock, with notfound_ok off).
  std::map<NodeId, msg::QueryReply> found_;
  std::map<NodeId, msg::QueryReply> not_found_;
  std::vector<NodeId> found_order_;
  std::set<NodeId> failed_;
  uint64_t deadline_ = 0;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_QUERY_COORDINATOR_H_
