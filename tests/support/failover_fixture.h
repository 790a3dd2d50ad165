// FailoverFixture: a ManualCluster and one set whose preference list leaves
// out the client's node (the highest id), so that the client's writes are
// coordinated through messages and can fail over; helpers to write, wait,
// and look at each replica. For the failover tests.

#ifndef BIGSET_TESTS_FAILOVER_FIXTURE_H_
#define BIGSET_TESTS_FAILOVER_FIXTURE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bigset/cluster/node.h"
#include "manual_cluster.h"

namespace bigset::testing {

struct FailoverFixture {
  // `nodes` nodes, N = n; writes need W = 2, retry every 100 ms, time out
  // after 2 s.
  explicit FailoverFixture(int nodes = 4, int n = 3, NodeOptions options = {},
                           uint32_t ring_size = 4);

  // Starts a write of `ops` through the client; its result lands in
  // `result`, and `calls` counts the callbacks.
  void Write(std::vector<UpdateOp> ops);
  // Writes `ops` through the client, lets the first candidate `a` get the
  // request and then cuts it off (nothing to or from it is delivered until
  // c.Unhold()), and advances until the client has its answer: the write
  // went on through another coordinator while `a` may have applied it.
  // With `lose_reply`, a's reply (sent as it applied the write) is lost.
  void WriteWhileCutOff(NodeId a, std::vector<UpdateOp> ops,
                        bool lose_reply = false);
  // After WriteWhileCutOff: a's retransmitted requests are dropped, a gets
  // the chosen delta and its answer (its own delta) reaches the client.
  void GivenUpAnswers(NodeId a);
  // Advances time in 100 ms steps until the client has its answer.
  void AdvanceUntilAnswered(int max_steps = 60);
  // The dots of `element` in `set` (or `other_set`) on replica `node`.
  std::vector<Dot> DotsOn(NodeId node, const std::string& element,
                          const std::string* other_set = nullptr);
  // CHECKs that each replica of the set's preference list holds `count`
  // dots of `element`.
  void CheckDotsOnAll(const std::string& element, size_t count);
  // CHECKs that the client counted one late reply and replicated its extra
  // dot, answering once: every replica holds two dots of `element`.
  void CheckLateReplyReplicated(const std::string& element);
  // An R-quorum membership query of `element` through node `via`.
  std::vector<Dot> QuorumDots(NodeId via, const std::string& element,
                              int r = 2);
  NodeStats ClientStats() { return c.node(client).stats(); }
  // The request id of the client's write, from a delta it replicates
  // that is still queued (hold kReplicate to keep them); 0 if none is.
  uint64_t QueuedWriteId();

  ManualCluster c;
  NodeId client = 0;
  std::string set;
  uint32_t partition = 0;
  std::vector<NodeId> pl;
  ClusterWriteOptions wo;
  std::optional<absl::StatusOr<Delta>> result;
  int calls = 0;
};

}  // namespace bigset::testing

#endif  // BIGSET_TESTS_FAILOVER_FIXTURE_H_
