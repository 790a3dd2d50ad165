// ClusterMembership's handshake checks before a node joins (or replaces
// another): this node must complete the peer handshake with the new node,
// and the new node with this node (BIGSET.CLUSTER PROBE, answered by Probe
// below). A node that cannot would get a ring naming it and leave every
// partition it should receive moving for ever, with 0 keys sent (a
// certificate of another CA, another cluster name, a wrong address, a node
// not started). The new node also tries the other nodes of the ring; those
// it cannot reach are reported, not refused: a member that is down or
// frozen (or the node being replaced) must not stop a join.

#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "membership.h"
#include "resp_client.h"

namespace bigset::server {
namespace {
// How long a handshake may take (TLS included), and a PROBE call around it.
constexpr absl::Duration kHandshakeWait = absl::Seconds(5);
constexpr int kProbeCallTimeoutMs = 15000;
}  // namespace

std::map<NodeId, std::string> ClusterMembership::Handshakes(
    const std::vector<std::pair<NodeId, PeerAddress>>& peers) {
  std::map<NodeId, std::string> failed;
  NodeRunner* runner;
  {
    absl::MutexLock lock(&mu_);
    runner = runner_;
  }
  for (const auto& [id, address] : peers) {
    if (id == self_) continue;
    if (runner == nullptr) {
      failed[id] = "this node is not running yet";
      continue;
    }
    book_->Set(id, address);
    if (absl::Status s = runner->DialPeer(id); !s.ok()) {
      failed[id] = std::string(s.message());
      continue;
    }
    failed[id] = "";  // Pending.
  }
  const absl::Time deadline = absl::Now() + kHandshakeWait;
  while (true) {
    const TransportStats stats =
        runner != nullptr ? runner->TransportStatistics() : TransportStats{};
    bool pending = false;
    for (auto it = failed.begin(); it != failed.end();) {
      if (!it->second.empty()) {
        ++it;
        continue;
      }
      const PeerStats* peer = nullptr;
      for (const PeerStats& p : stats.peers) {
        if (p.node == it->first) peer = &p;
      }
      if (peer != nullptr && peer->connected) {
        it = failed.erase(it);
        continue;
      }
      if (absl::Now() >= deadline) {
        it->second = peer != nullptr && !peer->last_error.empty()
                         ? peer->last_error
                         : absl::StrCat("no handshake within ",
                                        absl::FormatDuration(kHandshakeWait));
      } else {
        pending = true;
      }
      ++it;
    }
    if (!pending) return failed;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

absl::StatusOr<std::vector<std::string>> ClusterMembership::Probe(
    const std::vector<std::pair<NodeId, PeerAddress>>& peers) {
  const std::map<NodeId, std::string> failed = Handshakes(peers);
  std::vector<std::string> lines;
  for (const auto& [id, address] : peers) {
    auto it = failed.find(id);
    lines.push_back(absl::StrCat("node ", id, " ", FormatAddress(address), ": ",
                                 id == self_          ? "this node"
                                 : it == failed.end() ? "ok"
                                                      : it->second));
  }
  return lines;
}

absl::Status ClusterMembership::CheckHandshakes(
    NodeId node, NodeId replaced, const NodeAddresses& addresses,
    const ClusterMap& map, std::vector<std::string>* notes) {
  const std::string fix =
      "; start it first (bigsetd --join ...), check the address and that "
      "its certificate comes from this cluster's CA, or add FORCE to change "
      "the ring anyway";
  if (node == self_) {
    // This node asks to join itself (as with etcd): it must complete the
    // handshake with some node of the ring; the others are reported.
    std::vector<std::pair<NodeId, PeerAddress>> peers;
    for (NodeId id : map.ring.nodes()) {
      auto a = map.nodes.find(id);
      if (a != map.nodes.end() && id != replaced && id != self_) {
        peers.emplace_back(id, a->second.peer);
      }
    }
    const std::map<NodeId, std::string> failed = Handshakes(peers);
    std::vector<std::string> lines;
    for (const auto& [id, why] : failed) {
      lines.push_back(absl::StrCat("node ", id, ": ", why));
    }
    if (!peers.empty() && failed.size() == peers.size()) {
      return absl::FailedPreconditionError(
          absl::StrCat("node ", node,
                       " cannot complete the peer handshake with any node "
                       "of the ring (",
                       absl::StrJoin(lines, "; "), ")", fix));
    }
    for (const std::string& line : lines) {
      notes->push_back(absl::StrCat("warning: node ", node,
                                    " cannot complete the peer handshake "
                                    "with ",
                                    line));
    }
    return absl::OkStatus();
  }
  // This node to the new one.
  const std::map<NodeId, std::string> mine =
      Handshakes({{node, addresses.peer}});
  if (auto it = mine.find(node); it != mine.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", self_, " cannot complete the peer handshake with node ", node,
        " at ", FormatAddress(addresses.peer), ": ", it->second, fix));
  }
  // The new one to every node of the ring (this one included), asked
  // through its client port.
  if (!addresses.client.has_value()) return absl::OkStatus();
  std::vector<std::string> args = {"BIGSET.CLUSTER", "PROBE"};
  for (NodeId id : map.ring.nodes()) {
    auto a = map.nodes.find(id);
    if (a == map.nodes.end() || id == replaced) continue;
    args.push_back(absl::StrCat(id));
    args.push_back(FormatAddress(a->second.peer));
  }
  absl::StatusOr<std::string> answer =
      RespCall(*addresses.client, password_, args, kProbeCallTimeoutMs);
  if (!answer.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", node, " did not answer BIGSET.CLUSTER PROBE at ",
                     FormatAddress(*addresses.client), ": ",
                     answer.status().message(), fix));
  }
  const std::string me = absl::StrCat("node ", self_, " ");
  bool reached_me = false;
  for (absl::string_view line : absl::StrSplit(*answer, '\n')) {
    if (line.empty() || absl::EndsWith(line, ": this node")) continue;
    const bool ok = absl::EndsWith(line, ": ok");
    if (absl::StartsWith(line, me)) {
      if (!ok) {
        return absl::FailedPreconditionError(
            absl::StrCat("node ", node,
                         " cannot complete the peer handshake "
                         "with ",
                         line, fix));
      }
      reached_me = true;
    } else if (!ok) {
      notes->push_back(absl::StrCat("warning: node ", node,
                                    " cannot complete the peer handshake "
                                    "with ",
                                    line));
    }
  }
  if (!reached_me) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", node,
                     "'s answer to BIGSET.CLUSTER PROBE does "
                     "not name node ",
                     self_, ": ", *answer));
  }
  return absl::OkStatus();
}

}  // namespace bigset::server
