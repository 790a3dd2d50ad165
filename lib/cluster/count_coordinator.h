// CountCoordinator: the state machine of one cluster count (Node::Count),
// outputs out (quorum_read_coordinator.h). Internal header.
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
#include "cluster/quorum_read_coordinator.h"
#include "cluster/request_output.h"
#include "net/message.h"

namespace bigset {

class CountCoordinator final
    : public QuorumReadCoordinator<msg::CountReply, std::optional<uint64_t>,
                                   RequestKind::kCount> {
 public:
  // `done` gets the agreed count, nullopt if the replicas differ, or an
  // error (fewer than R replicas answered in time).
  CountCoordinator(
      uint64_t id, std::string set, QuorumReadSetup setup,
      const ClusterReadOptions& options,
      std::function<void(absl::StatusOr<std::optional<uint64_t>>)> done);
  // Asks every node of the serving list.
  RequestOutput Start(uint64_t now);
  // A replica's answer.
  RequestOutput Step(NodeId from, const msg::CountReply& m);

 private:
  std::string RequestBytes() const override;
  void Answer(const std::vector<const msg::CountReply*>& replies,
              RequestOutput* out);
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_COUNT_COORDINATOR_H_
