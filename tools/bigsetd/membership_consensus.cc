// ClusterMembership's side of a MembershipAuthority (--membership etcd): the
// changes proposed to it, and the records its watch shows. See membership.h.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "membership.h"

namespace bigset::server {
namespace {

// How long a change waits for an unreachable authority before it fails.
constexpr absl::Duration kAuthorityWait = absl::Seconds(10);
// Races lost in a row before a change gives up (each loss means another
// change was recorded: the cluster makes progress meanwhile).
constexpr int kRaceAttempts = 8;
// How often a node that must record its ring asks the others again when
// too few of them answered.
constexpr absl::Duration kSeedRetry = absl::Seconds(2);

// Why `map` cannot be this node's cluster's: it places node `self` at
// another peer address than this node listens on (another cluster uses the
// same prefix, or the map is corrupt). Empty if it can be.
std::string ForeignMap(const ClusterMap& map, NodeId self,
                       const PeerAddress& own_peer) {
  auto it = map.nodes.find(self);
  if (it == map.nodes.end() || it->second.peer == own_peer) return "";
  return absl::StrCat("it places node ", self, " at ",
                      FormatAddress(it->second.peer), ", this node is at ",
                      FormatAddress(own_peer),
                      " (another cluster on the same --etcd-prefix?)");
}

}  // namespace

void ClusterMembership::OnAuthorityRecord(
    const std::optional<MembershipRecord>& record) {
  const ClusterMap mine = Current();
  if (!record.has_value() || record->epoch < mine.ring.epoch()) {
    // The authority has no ring, or an older one than this node's (a new
    // cluster, a wiped or restored etcd). This node's own ring may be
    // stale too: the ring to record is the newest a majority of the ring's
    // nodes know, asked on a worker (it waits on them).
    if (seeding_.exchange(true)) return;
    seeder_->Run([this, have = record.has_value() ? record->epoch : 0]() {
      SeedAuthority(have);
      seeding_.store(false);
    });
    return;
  }
  absl::StatusOr<ClusterMap> map = ClusterMap::Decode(record->map);
  if (!map.ok() || map->ring.epoch() != record->epoch) {
    log_->Error(absl::StrCat(
        "cluster: etcd's ring epoch ", record->epoch, " is not a cluster map ",
        map.ok() ? "of its epoch" : map.status().ToString(),
        "; ignored (this node keeps ring epoch ", mine.ring.epoch(), ")"));
    return;
  }
  if (std::string why = ForeignMap(*map, self_, mine.nodes.at(self_).peer);
      !why.empty()) {
    log_->Error(absl::StrCat("cluster: etcd's ring epoch ", record->epoch,
                             " is ignored: ", why));
    return;
  }
  absl::Status s = Install(*map);
  if (s.ok() || absl::IsFailedPrecondition(s)) return;
  if (absl::IsAborted(s)) {
    log_->Error(absl::StrCat(
        "cluster: etcd's ring epoch ", record->epoch,
        " differs from this node's ring of that epoch (started with "
        "another --node list?); this node keeps its own until the next "
        "change, which every node installs"));
    return;
  }
  log_->Warn(absl::StrCat("cluster: installing etcd's ring epoch ",
                          record->epoch, ": ", s.ToString()));
}

void ClusterMembership::SeedAuthority(uint64_t authority_epoch) {
  bool said = false;
  while (true) {
    const ClusterMap mine = Current();
    // Every node of this node's map with a client address, asked for its
    // map; the ring's nodes that answered (this one included) must be a
    // majority of the ring.
    ClusterMap best = mine;
    size_t answered = 0;
    const std::vector<NodeId>& ring = mine.ring.nodes();
    for (const auto& [id, a] : mine.nodes) {
      const bool member = std::find(ring.begin(), ring.end(), id) != ring.end();
      if (id == self_) {
        answered += member;
        continue;
      }
      if (!a.client.has_value()) continue;
      absl::StatusOr<ClusterMap> theirs = Fetch(*a.client, password_);
      if (!theirs.ok()) continue;
      answered += member;
      if (theirs->ring.epoch() > best.ring.epoch() &&
          ForeignMap(*theirs, self_, mine.nodes.at(self_).peer).empty()) {
        best = *std::move(theirs);
      }
    }
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || runner_ == nullptr) return;
    }
    absl::StatusOr<std::optional<MembershipRecord>> latest =
        authority_->Latest();
    if (latest.ok() && latest->has_value() &&
        (*latest)->epoch >= best.ring.epoch()) {
      return;  // Recorded meanwhile (by another node): the watch shows it.
    }
    if (latest.ok() && 2 * answered > ring.size()) {
      const uint64_t have = latest->has_value() ? (*latest)->epoch : 0;
      if (best.ring.epoch() > mine.ring.epoch()) {
        // This node was behind: it runs the newer ring first.
        if (absl::Status s = Install(best); !s.ok()) {
          log_->Warn(absl::StrCat("cluster: installing ring epoch ",
                                  best.ring.epoch(),
                                  " of a peer: ", s.ToString()));
        }
      }
      const ClusterMap record_map =
          Current().ring.epoch() == best.ring.epoch() ? Current() : best;
      MembershipRecord own{
          record_map.ring.epoch(), record_map.Encode(),
          absl::StrCat("the newest ring ", answered, " of ", ring.size(),
                       " ring nodes knew, recorded by node ", self_)};
      absl::Status s = authority_->Propose(own, have);
      if (s.ok()) {
        log_->Info(absl::StrCat(
            "cluster: recorded ring epoch ", own.epoch, " in etcd (it had ",
            have == 0 ? std::string("none") : absl::StrCat("epoch ", have),
            "; ", answered, " of ", ring.size(), " ring nodes answered)"));
        return;
      }
      if (absl::IsAborted(s)) return;  // Another node's won: the watch.
      log_->Warn(absl::StrCat("cluster: could not record ring epoch ",
                              own.epoch, " in etcd: ", s.ToString()));
    } else if (!said) {
      log_->Warn(absl::StrCat(
          "cluster: etcd ",
          authority_epoch == 0
              ? std::string("holds no ring")
              : absl::StrCat("holds ring epoch ", authority_epoch),
          ", older than this node's (", mine.ring.epoch(),
          "); recording the newest ring needs a majority of the ring's "
          "nodes to answer (",
          answered, " of ", ring.size(), " did",
          latest.ok() ? ""
                      : absl::StrCat("; etcd: ", latest.status().message()),
          "): retrying"));
      said = true;
    }
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), kSeedRetry) ||
        runner_ == nullptr) {
      return;
    }
  }
}

absl::StatusOr<std::optional<MembershipRecord>>
ClusterMembership::AuthorityLatest(absl::Time deadline) {
  bool said = false;
  while (true) {
    absl::StatusOr<std::optional<MembershipRecord>> latest =
        authority_->Latest();
    if (latest.ok() || (!absl::IsUnavailable(latest.status()) &&
                        !absl::IsDeadlineExceeded(latest.status()))) {
      return latest;
    }
    if (absl::Now() >= deadline) return latest.status();
    if (!said) {
      log_->Warn(absl::StrCat("cluster: a membership change waits for etcd: ",
                              latest.status().message()));
      said = true;
    }
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                             absl::Milliseconds(200)) ||
        runner_ == nullptr) {
      return absl::CancelledError("the node is shutting down");
    }
  }
}

absl::StatusOr<std::vector<std::string>>
ClusterMembership::ApplyThroughAuthority(const Change& change) {
  const absl::Time deadline = absl::Now() + kAuthorityWait;
  const std::string what = Describe(change);
  std::vector<std::string> races;
  // A proposal whose answer never came (a timeout): it may still land.
  std::optional<MembershipRecord> in_doubt;
  auto failed = [&](absl::Status s) {
    if (!in_doubt.has_value()) return s;
    // Whatever went wrong after, the timed-out request may still land.
    std::string why(s.message());
    if (const size_t cut = why.find(": the change was not made");
        cut != std::string::npos) {
      why.resize(cut);
    }
    return absl::Status(
        s.code(),
        absl::StrCat(why,
                     "; a request of this change to etcd "
                     "timed out, so it may have been "
                     "recorded as ring epoch ",
                     in_doubt->epoch, " after all: see BIGSET.CLUSTER STATUS"));
  };
  const PeerAddress own_peer = Current().nodes.at(self_).peer;
  for (int attempt = 0; attempt < kRaceAttempts; ++attempt) {
    // Before the read: a ring the watch installs after it is newer than
    // what the read saw, not a sign that etcd lags.
    const uint64_t local_epoch = Current().ring.epoch();
    absl::StatusOr<std::optional<MembershipRecord>> latest =
        AuthorityLatest(deadline);
    if (!latest.ok()) {
      if (absl::IsCancelled(latest.status())) return failed(latest.status());
      if (absl::IsUnavailable(latest.status()) ||
          absl::IsDeadlineExceeded(latest.status())) {
        return failed(absl::UnavailableError(absl::StrCat(
            "etcd cannot be reached (", latest.status().message(),
            "): the change was not made; reads and writes go on with ring "
            "epoch ",
            Current().ring.epoch())));
      }
      return failed(
          absl::Status(latest.status().code(),
                       absl::StrCat("etcd: ", latest.status().message(),
                                    ": the change was not made")));
    }
    ClusterMap base = Current();
    uint64_t expected = 0;
    if (!latest->has_value() || (*latest)->epoch < local_epoch) {
      // The nodes record their newest ring first (SeedAuthority): a change
      // on a ring etcd does not hold could fork the history.
      return failed(absl::UnavailableError(absl::StrCat(
          "etcd holds ",
          latest->has_value() ? absl::StrCat("ring epoch ", (*latest)->epoch)
                              : std::string("no ring"),
          ", older than this node's epoch ", local_epoch,
          ": the nodes record the newest ring once a majority of them "
          "answer; the change was not made, try again shortly")));
    }
    if (in_doubt.has_value() && **latest == *in_doubt) {
      // The timed-out proposal landed after all.
      races.push_back("a request timed out, and was recorded");
      in_doubt.reset();
      absl::StatusOr<ClusterMap> landed = ClusterMap::Decode((*latest)->map);
      if (landed.ok()) {
        (void)Install(*landed);
        std::vector<std::string> report{
            absl::StrCat("epoch ", landed->ring.epoch(), ": ring ",
                         absl::StrJoin(landed->ring.nodes(), ","))};
        report.push_back(
            "recorded in etcd: every node installs it from its watch");
        return report;
      }
    }
    expected = (*latest)->epoch;
    absl::StatusOr<ClusterMap> recorded = ClusterMap::Decode((*latest)->map);
    if (!recorded.ok()) {
      return failed(absl::DataLossError(absl::StrCat(
          "etcd's ring epoch ", expected, " is not a cluster map: ",
          recorded.status().message(), "; the change was not made")));
    }
    if (std::string why = ForeignMap(*recorded, self_, own_peer);
        !why.empty()) {
      return failed(absl::FailedPreconditionError(absl::StrCat(
          "etcd's ring epoch ", expected, " is not this cluster's: ", why,
          "; the change was not made")));
    }
    if (recorded->ring.epoch() < base.ring.epoch()) {
      // A newer ring arrived (the watch) since the read: read again.
      races.push_back(
          absl::StrCat("ring epoch ", base.ring.epoch(), " arrived meanwhile"));
      continue;
    }
    // Addresses this node knows and the record lacks are kept.
    for (const auto& [id, a] : base.nodes) {
      recorded->nodes.try_emplace(id, a);
    }
    base = std::move(*recorded);
    absl::StatusOr<ClusterMap> next = Next(base, change);
    if (!next.ok()) {
      if (races.empty()) return failed(next.status());
      return failed(absl::Status(
          next.status().code(),
          absl::StrCat(next.status().message(), " (", races.back(), ")")));
    }
    const MembershipRecord record{next->ring.epoch(), next->Encode(), what};
    absl::Status s = authority_->Propose(record, expected);
    if (absl::IsDeadlineExceeded(s) || absl::IsUnknown(s)) {
      // It may have been recorded, now or later: the next reads tell.
      in_doubt = record;
      absl::StatusOr<std::optional<MembershipRecord>> after =
          AuthorityLatest(deadline);
      if (after.ok() && after->has_value() && **after == record) {
        s = absl::OkStatus();
        in_doubt.reset();
      } else {
        s = absl::AbortedError(
            absl::StrCat("etcd did not answer in time (", s.message(), ")"));
      }
    }
    if (absl::IsAborted(s)) {
      races.push_back(std::string(s.message()));
      log_->Info(absl::StrCat("cluster: ", what, ": ", s.message(),
                              "; trying again on top of it"));
      continue;
    }
    if (!s.ok()) return failed(s);
    // The watch installs it too; installed here at once so that the reply
    // means this node runs it.
    if (absl::Status i = Install(*next);
        !i.ok() && !absl::IsFailedPrecondition(i)) {
      log_->Warn(absl::StrCat("cluster: installing ring epoch ", record.epoch,
                              " here: ", i.ToString()));
    }
    std::vector<std::string> report;
    report.push_back(absl::StrCat("epoch ", record.epoch, ": ring ",
                                  absl::StrJoin(next->ring.nodes(), ",")));
    for (const std::string& race : races) {
      report.push_back(
          absl::StrCat("lost a race: ", race, "; applied on top of it"));
    }
    report.push_back("recorded in etcd: every node installs it from its watch");
    for (const std::string& line : report) {
      log_->Info(absl::StrCat("cluster: ", what, ": ", line));
    }
    return report;
  }
  return failed(absl::AbortedError(absl::StrCat(
      "lost ", kRaceAttempts, " races in a row to other changes (the last: ",
      races.back(), "); issue it again")));
}

}  // namespace bigset::server
