// Helpers shared by the anti-entropy tests (anti_entropy_test,
// anti_entropy_attack_test): a set's value as one replica holds it, read
// directly (Node::LocalReplica, no cluster read, so no read repair), and the
// ORSWOT merge of several replicas' values.

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

}  // namespace bigset::testing

#endif  // BIGSET_TESTS_REPLICA_VIEWS_H_
