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

}  // namespace

void ClusterMembership::OnAuthorityRecord(
    const std::optional<MembershipRecord>& record) {
  const ClusterMap mine = Current();
  if (!record.has_value() || record->epoch < mine.ring.epoch()) {
    // The authority has no ring, or an older one than this node's: record
    // this node's. Of several nodes doing so at once, one wins and the
    // watch shows the others its ring.
    MembershipRecord own{
        mine.ring.epoch(), mine.Encode(),
        absl::StrCat("the ring node ", self_, " started with")};
    absl::Status s =
        authority_->Propose(own, record.has_value() ? record->epoch : 0);
    if (s.ok()) {
      log_->Info(absl::StrCat(
          "cluster: recorded ring epoch ", own.epoch, " in etcd (it had ",
          record.has_value() ? absl::StrCat("epoch ", record->epoch) : "none",
          ")"));
    } else if (!absl::IsAborted(s)) {
      log_->Warn(absl::StrCat("cluster: could not record ring epoch ",
                              own.epoch, " in etcd: ", s.ToString()));
    }
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
                             absl::Milliseconds(200))) {
      return absl::UnavailableError("shutting down");
    }
  }
}

absl::StatusOr<std::vector<std::string>>
ClusterMembership::ApplyThroughAuthority(const Change& change) {
  const absl::Time deadline = absl::Now() + kAuthorityWait;
  const std::string what = Describe(change);
  std::vector<std::string> races;
  for (int attempt = 0; attempt < kRaceAttempts; ++attempt) {
    absl::StatusOr<std::optional<MembershipRecord>> latest =
        AuthorityLatest(deadline);
    if (!latest.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "etcd cannot be reached (", latest.status().message(),
          "): the change was not made; reads and writes go on with ring "
          "epoch ",
          Current().ring.epoch()));
    }
    ClusterMap base = Current();
    uint64_t expected = 0;
    if (latest->has_value()) {
      expected = (*latest)->epoch;
      absl::StatusOr<ClusterMap> recorded = ClusterMap::Decode((*latest)->map);
      if (!recorded.ok()) {
        return absl::DataLossError(absl::StrCat(
            "etcd's ring epoch ", expected,
            " is not a cluster map: ", recorded.status().message()));
      }
      if (recorded->ring.epoch() >= base.ring.epoch()) {
        // Addresses this node knows and the record lacks are kept.
        for (const auto& [id, a] : base.nodes)
          recorded->nodes.try_emplace(id, a);
        base = std::move(*recorded);
      }
    }
    absl::StatusOr<ClusterMap> next = Next(base, change);
    if (!next.ok()) {
      if (races.empty()) return next.status();
      return absl::Status(
          next.status().code(),
          absl::StrCat(next.status().message(), " (", races.back(), ")"));
    }
    const MembershipRecord record{next->ring.epoch(), next->Encode(), what};
    absl::Status s = authority_->Propose(record, expected);
    if (absl::IsDeadlineExceeded(s) || absl::IsUnknown(s)) {
      // It may have been recorded: look.
      absl::StatusOr<std::optional<MembershipRecord>> after =
          AuthorityLatest(deadline);
      if (!after.ok()) return s;
      if (after->has_value() && **after == record) {
        s = absl::OkStatus();
      } else {
        s = absl::AbortedError(
            absl::StrCat("etcd did not record it in time (", s.message(), ")"));
      }
    }
    if (absl::IsAborted(s)) {
      races.push_back(std::string(s.message()));
      log_->Info(absl::StrCat("cluster: ", what, ": ", s.message(),
                              "; trying again on top of it"));
      continue;
    }
    if (!s.ok()) return s;
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
  return absl::AbortedError(absl::StrCat(
      "lost ", kRaceAttempts, " races in a row to other changes (the last: ",
      races.back(), "); issue it again"));
}

}  // namespace bigset::server
