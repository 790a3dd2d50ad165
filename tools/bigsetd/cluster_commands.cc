// BIGSET.CLUSTER: the operator's membership commands, and the ones nodes
// send each other (GET, INSTALL). See membership.h.
//
//   BIGSET.CLUSTER STATUS                         this node's view
//   BIGSET.CLUSTER JOIN NODE PEER_ADDR CLIENT_ADDR [FORCE]
//   BIGSET.CLUSTER LEAVE NODE
//   BIGSET.CLUSTER REPLACE OLD NEW PEER_ADDR CLIENT_ADDR [FORCE]
//   BIGSET.CLUSTER GET                            the cluster map (text)
//   BIGSET.CLUSTER INSTALL MAP
//   BIGSET.CLUSTER PROBE NODE PEER_ADDR [NODE PEER_ADDR ...]
//                                  handshakes with those peers (for JOIN)

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl_compat.h"
#include "membership.h"
#include "session.h"

namespace bigset::server {
namespace {

absl::StatusOr<NodeAddresses> ParseAddresses(const std::string& peer,
                                             const std::string& client) {
  absl::StatusOr<PeerAddress> p = ParsePeerAddress(peer);
  absl::StatusOr<PeerAddress> c = ParsePeerAddress(client);
  if (!p.ok() || !c.ok()) {
    return absl::InvalidArgumentError("addresses are HOST:PORT");
  }
  return NodeAddresses{*p, *c};
}

std::string Status(const ClusterMap& map, NodeId self,
                   const absl::StatusOr<NodeStats>& stats,
                   const absl::StatusOr<std::vector<PartitionMove>>& moving,
                   const TransportStats& transport) {
  std::string out;
  absl::StrAppend(&out, "node:", self, "\nring_epoch:", map.ring.epoch(),
                  "\nring_nodes:", absl::StrJoin(map.ring.nodes(), ","),
                  "\nring_size:", map.ring.ring_size(), "\nn:", map.ring.n(),
                  "\n");
  for (const auto& [id, a] : map.nodes) {
    const bool member =
        std::find(map.ring.nodes().begin(), map.ring.nodes().end(), id) !=
        map.ring.nodes().end();
    absl::StrAppend(&out, "member:", id, " peer=", FormatAddress(a.peer),
                    " client=", a.client ? FormatAddress(*a.client) : "-",
                    member ? "" : " (not in the ring)",
                    id == self ? " (this node)" : "", "\n");
  }
  if (stats.ok()) {
    // The hand-off counters an operator watches during a membership change.
    for (const auto& [name, value] : stats->All()) {
      static constexpr std::string_view kShown[] = {
          "handoff.partitions_moving",
          "handoff.running",
          "handoff.pending",
          "handoff.incoming",
          "handoff.done",
          "handoff.keys_sent",
          "handoff.keys_received",
          "handoff.partitions_releasing"};
      for (std::string_view shown : kShown) {
        if (name == shown) {
          absl::StrAppend(&out, name, ":", value, "\n");
        }
      }
    }
  }
  if (moving.ok()) {
    for (const PartitionMove& m : *moving) {
      absl::StrAppend(&out, "moving:", m.partition,
                      " serving=", absl::StrJoin(m.serving, ","),
                      " target=", absl::StrJoin(m.target, ","),
                      " state=", m.state, " for_ms=", m.since_micros / 1000);
      // Why a move that waits on a peer makes no progress.
      for (const PeerStats& p : transport.peers) {
        if (m.peer != 0 && p.node == m.peer && !p.connected &&
            !p.last_error.empty()) {
          absl::StrAppend(&out, " peer_error=", p.last_error);
        }
      }
      absl::StrAppend(&out, "\n");
    }
  }
  return out;
}

}  // namespace

void Session::CmdCluster(Args& a) {
  const std::string sub = absl::AsciiStrToLower(a[1]);
  ClusterMembership* membership = ctx_->membership;
  NodeRunner* runner = ctx_->runner;
  const NodeId self = ctx_->config->id;
  // Everything below may wait (disk, the node, other nodes): on the worker.
  auto reply_text =
      Later<absl::StatusOr<std::string>>([this](absl::StatusOr<std::string> r) {
        if (r.ok()) {
          Out().Bulk(*r);
        } else {
          ReplyError(absl::StrCat("ERR ",
                                  absl::StatusCodeToString(r.status().code()),
                                  ": ", r.status().message()));
        }
        Done();
      });
  auto bad = [&](std::string_view why) {
    ReplyError(absl::StrCat("ERR ", AV(why)));
    Done();
  };
  if (sub == "status" && a.size() == 2) {
    ctx_->worker->Run([membership, runner, self, reply_text]() {
      reply_text(Status(membership->Current(), self, runner->Stats(),
                        runner->Moving(), runner->TransportStatistics()) +
                 absl::StrCat("membership:",
                              membership->has_authority() ? "etcd" : "builtin",
                              "\n"));
    });
  } else if (sub == "get" && a.size() == 2) {
    reply_text(membership->Current().Encode());
  } else if (sub == "install" && a.size() == 3 && membership->has_authority()) {
    bad("membership is decided in etcd on this node (--membership etcd): "
        "INSTALL is refused; use JOIN, LEAVE or REPLACE");
  } else if (sub == "install" && a.size() == 3) {
    absl::StatusOr<ClusterMap> map = ClusterMap::Decode(a[2]);
    if (!map.ok()) return bad(SV(map.status().message()));
    ctx_->worker->Run([membership, map = *map, reply_text]() {
      absl::Status s = membership->Install(map);
      reply_text(s.ok() ? absl::StatusOr<std::string>("OK") : s);
    });
  } else if (sub == "probe" && a.size() >= 4 && a.size() % 2 == 0) {
    std::vector<std::pair<NodeId, PeerAddress>> peers;
    for (size_t i = 2; i + 1 < a.size(); i += 2) {
      NodeId id = 0;
      absl::StatusOr<PeerAddress> address = ParsePeerAddress(a[i + 1]);
      if (!absl::SimpleAtoi(a[i], &id) || id == 0 || !address.ok()) {
        return bad("usage: BIGSET.CLUSTER PROBE NODE HOST:PORT ...");
      }
      peers.emplace_back(id, *address);
    }
    ctx_->membership_worker->Run([membership, peers, reply_text]() {
      absl::StatusOr<std::vector<std::string>> lines = membership->Probe(peers);
      if (!lines.ok()) {
        reply_text(lines.status());
      } else {
        reply_text(absl::StrJoin(*lines, "\n") + "\n");
      }
    });
  } else if ((sub == "join" && (a.size() == 5 || a.size() == 6)) ||
             (sub == "leave" && a.size() == 3) ||
             (sub == "replace" && (a.size() == 6 || a.size() == 7))) {
    ClusterMembership::Change change;
    const size_t plain = sub == "join" ? 5 : 6;
    if (sub != "leave" && a.size() == plain + 1) {
      if (absl::AsciiStrToLower(a[plain]) != "force") {
        return bad("the last argument of JOIN and REPLACE may only be FORCE");
      }
      change.force = true;
    }
    if (!absl::SimpleAtoi(a[2], &change.node) || change.node == 0) {
      return bad("node ids are integers > 0");
    }
    if (sub == "join") {
      change.kind = ClusterMembership::ChangeKind::kJoin;
      absl::StatusOr<NodeAddresses> addresses = ParseAddresses(a[3], a[4]);
      if (!addresses.ok()) return bad(SV(addresses.status().message()));
      change.addresses = *addresses;
    } else if (sub == "leave") {
      change.kind = ClusterMembership::ChangeKind::kLeave;
    } else {
      change.kind = ClusterMembership::ChangeKind::kReplace;
      if (!absl::SimpleAtoi(a[3], &change.replacement) ||
          change.replacement == 0) {
        return bad("node ids are integers > 0");
      }
      absl::StatusOr<NodeAddresses> addresses = ParseAddresses(a[4], a[5]);
      if (!addresses.ok()) return bad(SV(addresses.status().message()));
      change.addresses = *addresses;
    }
    ctx_->log->Info(absl::StrCat("client ", id_, " (", peer_,
                                 "): BIGSET.CLUSTER ",
                                 absl::StrJoin(a.begin() + 1, a.end(), " ")));
    // On a worker of its own: pushes to slow nodes must not hold up INFO.
    ctx_->membership_worker->Run([membership, change, reply_text]() {
      absl::StatusOr<std::vector<std::string>> report =
          membership->Apply(change);
      if (!report.ok()) {
        reply_text(report.status());
      } else {
        reply_text(absl::StrJoin(*report, "\n") + "\n");
      }
    });
  } else {
    bad("usage: BIGSET.CLUSTER STATUS | JOIN NODE PEER_ADDR CLIENT_ADDR "
        "[FORCE] | LEAVE NODE | REPLACE OLD NEW PEER_ADDR CLIENT_ADDR [FORCE] "
        "| GET | INSTALL MAP | PROBE NODE PEER_ADDR ...");
  }
}

}  // namespace bigset::server
