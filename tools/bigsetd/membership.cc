#include "membership.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "resp_client.h"

namespace bigset::server {
namespace {
constexpr int kCallTimeoutMs = 5000;
constexpr int kFetchAttempts = 120;
constexpr uint64_t kMaxEpochJump = uint64_t{1} << 20;
}  // namespace

ClusterMembership::ClusterMembership(
    ClusterMap map, NodeId self, std::string data_dir, std::string password,
    AddressBook* book, Logger* log,
    std::unique_ptr<MembershipAuthority> authority)
    : authority_(std::move(authority)),
      self_(self),
      data_dir_(std::move(data_dir)),
      password_(std::move(password)),
      book_(book),
      log_(log),
      map_(std::move(map)),
      fetcher_(std::make_unique<Worker>()),
      seeder_(std::make_unique<Worker>()) {}

ClusterMembership::~ClusterMembership() {
  if (authority_ != nullptr) authority_->Close();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  seeder_.reset();
  fetcher_.reset();
}

absl::Status ClusterMembership::Attach(NodeRunner* runner) {
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = map_.Save(data_dir_); !s.ok()) return s;
    runner_ = runner;
  }
  if (authority_ != nullptr) {
    return authority_->Watch(
        [this](const std::optional<MembershipRecord>& record) {
          OnAuthorityRecord(record);
        });
  }
  return absl::OkStatus();
}

void ClusterMembership::Detach() {
  // The watch installs through runner_: stopped first, without mu_ (its
  // callback takes it).
  if (authority_ != nullptr) authority_->Close();
  absl::MutexLock lock(&mu_);
  runner_ = nullptr;
}

ClusterMap ClusterMembership::Current() const {
  absl::MutexLock lock(&mu_);
  return map_;
}

absl::Status ClusterMembership::Install(const ClusterMap& map) {
  absl::MutexLock lock(&mu_);
  return InstallLocked(map);
}

absl::Status ClusterMembership::InstallLocked(const ClusterMap& map) {
  const uint64_t have = map_.ring.epoch();
  const uint64_t got = map.ring.epoch();
  // Epochs grow by one per change; a node that missed some sees a few at
  // once. A jump this large is a forged or broken map, and would leave no
  // room for the next change.
  if (got > have + kMaxEpochJump) {
    return absl::InvalidArgumentError(absl::StrCat(
        "implausible ring epoch ", got, " (this node has ", have, ")"));
  }
  if (got < have) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stale cluster map: epoch ", got, ", this node has ", have));
  }
  if (got == have) {
    if (map.ring.Encode() != map_.ring.Encode()) {
      return absl::AbortedError(absl::StrCat("another ring has epoch ", got,
                                             " here: issue the change again"));
    }
    // The same ring: learn addresses it adds, if any.
    bool more = false;
    for (const auto& [id, a] : map.nodes) more |= !map_.nodes.contains(id);
    if (!more) return absl::OkStatus();
  }
  if (map.ring.ring_size() != map_.ring.ring_size() ||
      map.ring.n() != map_.ring.n()) {
    return absl::InvalidArgumentError("another ring size or n");
  }
  if (runner_ == nullptr) return absl::UnavailableError("node not running");
  ClusterMap next = map;
  // Addresses are never forgotten here: a node that left may still hand
  // off what it holds.
  for (const auto& [id, a] : map_.nodes) next.nodes.try_emplace(id, a);
  // Saved first: a crash before the ring is installed reopens with it.
  if (absl::Status s = next.Save(data_dir_); !s.ok()) return s;
  for (const auto& [id, a] : next.nodes) book_->Set(id, a.peer);
  if (got > have) {
    if (absl::Status s = runner_->InstallRing(next.ring); !s.ok()) {
      // The store may have it already (a crash after the install, before
      // this map was saved): what it has is at least as new.
      if (!absl::IsFailedPrecondition(s)) return s;
    }
    log_->Info(absl::StrCat("cluster: installed ring epoch ", got, " nodes ",
                            absl::StrJoin(next.ring.nodes(), ",")));
  }
  map_ = std::move(next);
  return absl::OkStatus();
}

std::string ClusterMembership::Describe(const Change& change) const {
  std::string addresses;
  if (change.kind != ChangeKind::kLeave) {
    addresses = absl::StrCat(" ", FormatAddress(change.addresses.peer), " ",
                             change.addresses.client
                                 ? FormatAddress(*change.addresses.client)
                                 : "-");
  }
  switch (change.kind) {
    case ChangeKind::kJoin:
      return absl::StrCat("JOIN ", change.node, addresses, " through node ",
                          self_);
    case ChangeKind::kLeave:
      return absl::StrCat("LEAVE ", change.node, " through node ", self_);
    case ChangeKind::kReplace:
      return absl::StrCat("REPLACE ", change.node, " ", change.replacement,
                          addresses, " through node ", self_);
  }
  return "";
}

absl::StatusOr<ClusterMap> ClusterMembership::Next(const ClusterMap& base,
                                                   const Change& change) {
  ClusterMap next = base;
  std::vector<NodeId> nodes = next.ring.nodes();
  auto in_ring = [&](NodeId id) {
    return std::find(nodes.begin(), nodes.end(), id) != nodes.end();
  };
  switch (change.kind) {
    case ChangeKind::kJoin:
      if (in_ring(change.node)) {
        return absl::AlreadyExistsError(
            absl::StrCat("node ", change.node, " is in the ring"));
      }
      nodes.push_back(change.node);
      next.nodes[change.node] = change.addresses;
      break;
    case ChangeKind::kLeave:
      if (!in_ring(change.node)) {
        return absl::NotFoundError(
            absl::StrCat("node ", change.node, " is not in the ring"));
      }
      nodes.erase(std::find(nodes.begin(), nodes.end(), change.node));
      break;
    case ChangeKind::kReplace:
      if (!in_ring(change.node)) {
        return absl::NotFoundError(
            absl::StrCat("node ", change.node, " is not in the ring"));
      }
      if (in_ring(change.replacement)) {
        return absl::AlreadyExistsError(
            absl::StrCat("node ", change.replacement, " is in the ring"));
      }
      *std::find(nodes.begin(), nodes.end(), change.node) = change.replacement;
      next.nodes[change.replacement] = change.addresses;
      break;
  }
  RingOptions ro;
  ro.ring_size = next.ring.ring_size();
  ro.n = next.ring.n();
  ro.epoch = next.ring.epoch() + 1;
  ro.placement = next.ring.placement();
  absl::StatusOr<Ring> ring = Ring::Create(nodes, ro);
  if (!ring.ok()) return ring.status();
  next.ring = *ring;
  return next;
}

absl::StatusOr<std::vector<std::string>> ClusterMembership::Apply(
    const Change& change) {
  std::vector<std::string> notes;
  if (change.kind != ChangeKind::kLeave && !change.force) {
    const ClusterMap current = Current();
    // Refusals of the change itself first (the node is in the ring).
    if (absl::StatusOr<ClusterMap> next = Next(current, change); !next.ok()) {
      return next.status();
    }
    const NodeId node =
        change.kind == ChangeKind::kJoin ? change.node : change.replacement;
    if (absl::Status s = CheckHandshakes(
            node, change.kind == ChangeKind::kReplace ? change.node : 0,
            change.addresses, current, &notes);
        !s.ok()) {
      log_->Warn(absl::StrCat("cluster: ", Describe(change),
                              " refused: ", s.message()));
      return s;
    }
    for (const std::string& note : notes) {
      log_->Warn(absl::StrCat("cluster: ", note));
    }
  }
  absl::StatusOr<std::vector<std::string>> report = ApplyChecked(change);
  if (report.ok()) report->insert(report->end(), notes.begin(), notes.end());
  return report;
}

absl::StatusOr<std::vector<std::string>> ClusterMembership::ApplyChecked(
    const Change& change) {
  if (authority_ != nullptr) return ApplyThroughAuthority(change);
  absl::StatusOr<ClusterMap> next = Next(Current(), change);
  if (!next.ok()) return next.status();
  if (absl::Status s = Install(*next); !s.ok()) return s;
  // Push it to every other node (those that left too: they must learn
  // they hand off).
  const ClusterMap installed = Current();
  std::vector<std::string> report;
  report.push_back(absl::StrCat("epoch ", installed.ring.epoch(), ": ring ",
                                absl::StrJoin(installed.ring.nodes(), ",")));
  const std::string text = installed.Encode();
  for (const auto& [id, a] : installed.nodes) {
    if (id == self_) {
      report.push_back(absl::StrCat("node ", id, ": installed (this node)"));
      continue;
    }
    if (!a.client.has_value()) {
      report.push_back(absl::StrCat("node ", id,
                                    ": no client address, will fetch the map "
                                    "when it hears of the epoch"));
      continue;
    }
    absl::StatusOr<std::string> r =
        RespCall(*a.client, password_, {"BIGSET.CLUSTER", "INSTALL", text},
                 kCallTimeoutMs);
    report.push_back(absl::StrCat(
        "node ", id, ": ",
        r.ok() ? "installed"
               : absl::StrCat("not reached (", r.status().message(),
                              "); it catches up when it hears of the epoch")));
  }
  for (const std::string& line : report)
    log_->Info(absl::StrCat("cluster: ", line));
  return report;
}

absl::StatusOr<ClusterMap> ClusterMembership::Fetch(
    const PeerAddress& address, const std::string& password) {
  absl::StatusOr<std::string> text =
      RespCall(address, password, {"BIGSET.CLUSTER", "GET"}, kCallTimeoutMs);
  if (!text.ok()) return text.status();
  return ClusterMap::Decode(*text);
}

void ClusterMembership::OnStaleRing(uint64_t epoch, NodeId from) {
  // Called on the node's thread, which Install may be waiting for while it
  // holds mu_: take no lock here, only queue the fetch.
  fetcher_->Run([this, epoch, from]() {
    // The node reports an epoch once: keep trying (the reporter first,
    // then any node with a client address) until it is installed.
    for (int attempt = 0; attempt < kFetchAttempts; ++attempt) {
      std::vector<std::pair<NodeId, PeerAddress>> sources;
      {
        absl::MutexLock lock(&mu_);
        if (epoch <= map_.ring.epoch() || stopping_) return;
        auto it = map_.nodes.find(from);
        if (it != map_.nodes.end() && it->second.client.has_value()) {
          sources.emplace_back(from, *it->second.client);
        }
        for (const auto& [id, a] : map_.nodes) {
          if (id != from && id != self_ && a.client.has_value()) {
            sources.emplace_back(id, *a.client);
          }
        }
      }
      // Unavailable: the node runs but is not attached yet (its starting
      // map is being saved); tried again shortly, without a warning.
      bool not_attached = false;
      for (const auto& [id, client] : sources) {
        absl::StatusOr<ClusterMap> map = Fetch(client, password_);
        if (!map.ok() || map->ring.epoch() < epoch) continue;
        absl::Status s = Install(*map);
        if (s.ok()) return;
        if (absl::IsUnavailable(s)) {
          not_attached = true;
          break;
        }
        log_->Warn(
            absl::StrCat("cluster: the map of node ", id, ": ", s.ToString()));
      }
      if (attempt == 0 && !not_attached) {
        log_->Warn(absl::StrCat("cluster: node ", from, " runs ring epoch ",
                                epoch,
                                ", and no node answered with its map yet; "
                                "retrying"));
      }
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(
          absl::Condition(&stopping_),
          not_attached ? absl::Milliseconds(50) : absl::Seconds(1));
    }
    log_->Error(
        absl::StrCat("cluster: could not fetch ring epoch ", epoch,
                     ": install the map by hand (BIGSET.CLUSTER INSTALL)"));
  });
}

}  // namespace bigset::server
