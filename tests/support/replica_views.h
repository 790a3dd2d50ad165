// Helpers shared by the anti-entropy tests (anti_entropy_test,
// anti_entropy_attack_test, anti_entropy_scale_test): a set's value as one
// replica holds it, read directly (Node::LocalReplica, no cluster read, so
// no read repair), and the ORSWOT merge of several replicas' values.

#ifndef BIGSET_TESTS_REPLICA_VIEWS_H_
#define BIGSET_TESTS_REPLICA_VIEWS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "bigset/core/clock.h"
#include "bigset/testing/sim.h"

namespace bigset::testing {

// element -> dots: a set's value on a replica, or merged.
using Value = std::map<std::string, std::set<Dot>>;

struct ReplicaView {
  NodeId node = 0;
  Clock clock;
  Value value;
};

// `set` on `node`'s replica (REQUIREs that the node is up and holds one).
ReplicaView View(Simulator& sim, NodeId node, const std::string& set);
// `set` on every replica of its preference list.
std::vector<ReplicaView> Views(Simulator& sim, const std::string& set);
// The ORSWOT merge of replicas: a dot survives if some replica has it and
// every replica that has seen it still has it.
Value Merge(const std::vector<ReplicaView>& views);

// Writes `n` one-element sets named "<prefix><i><suffix>" that fall in
// partition `p` straight into `holder`'s replica: the other replicas never hear
// of them, as after a replaced disk, or W = 1 writes while they were away.
// Returns their names.
std::vector<std::string> SetsOnlyOn(Simulator& sim, NodeId holder, uint32_t p,
                                    const std::string& prefix, int n,
                                    const std::string& suffix = "");
// How many of `sets` `node`'s replica holds exactly as `reference`'s does
// (same clock, same elements and dots).
size_t SameAs(Simulator& sim, NodeId node, NodeId reference,
              const std::vector<std::string>& sets);
// Every node counter (NodeStats), summed over the nodes that are up.
std::map<std::string, uint64_t> SumStats(Simulator& sim);

}  // namespace bigset::testing

#endif  // BIGSET_TESTS_REPLICA_VIEWS_H_
