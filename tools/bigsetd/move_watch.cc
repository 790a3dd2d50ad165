#include "move_watch.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace bigset::server {
namespace {

// A state without its numbers ("sending to 4: streaming (set #12, run 2)"
// -> "sending to : streaming (set #, run )"): moves alike are grouped.
std::string Shape(std::string_view state) {
  std::string out;
  for (char c : state) {
    if (c < '0' || c > '9') out.push_back(c);
  }
  return out;
}

}  // namespace

std::vector<StuckMove> MoveTracker::Look(
    absl::Time now, const std::vector<PartitionMove>& moves,
    const TransportStats& transport, std::vector<uint32_t>* moving_again) {
  std::vector<StuckMove> stuck;
  std::map<uint32_t, Seen> next;
  for (const PartitionMove& m : moves) {
    Seen s;
    auto it = seen_.find(m.partition);
    if (it != seen_.end() && it->second.state == m.state) {
      s = it->second;
    } else {
      if (it != seen_.end() && it->second.reported) {
        moving_again->push_back(m.partition);
      }
      s.state = m.state;
      s.since = now;
    }
    if (!s.reported && now - s.since >= stuck_after_) {
      s.reported = true;
      StuckMove sm{.partition = m.partition,
                   .state = m.state,
                   .peer = m.peer,
                   .peer_error = "",
                   .stuck_for = now - s.since};
      for (const PeerStats& p : transport.peers) {
        if (p.node == m.peer && m.peer != 0 && !p.connected) {
          sm.peer_error = p.last_error.empty() ? "not connected" : p.last_error;
        }
      }
      stuck.push_back(std::move(sm));
    }
    next[m.partition] = std::move(s);
  }
  for (const auto& [p, s] : seen_) {
    if (s.reported && !next.contains(p)) moving_again->push_back(p);
  }
  seen_ = std::move(next);
  return stuck;
}

std::string DescribeStuck(const std::vector<StuckMove>& stuck) {
  // Groups: (shape of the state, peer error) -> partitions.
  std::map<std::pair<std::string, std::string>, std::vector<const StuckMove*>>
      groups;
  for (const StuckMove& m : stuck) {
    groups[{Shape(m.state), m.peer_error}].push_back(&m);
  }
  std::vector<std::string> parts;
  for (const auto& [key, moves] : groups) {
    std::vector<std::string> ids;
    for (size_t i = 0; i < moves.size() && i < 5; ++i) {
      ids.push_back(absl::StrCat(moves[i]->partition));
    }
    std::string what = absl::StrCat(
        moves.size() == 1 ? "partition " : "partitions ",
        absl::StrJoin(ids, ", "),
        moves.size() > 5 ? absl::StrCat(" and ", moves.size() - 5, " more")
                         : "",
        ": ", moves.front()->state, " for ",
        absl::ToInt64Seconds(moves.front()->stuck_for), " s");
    if (!key.second.empty()) {
      absl::StrAppend(&what, "; node ", moves.front()->peer,
                      " cannot be reached: ", key.second);
    }
    parts.push_back(std::move(what));
  }
  return absl::StrCat("moves make no progress (", absl::StrJoin(parts, "; "),
                      ")");
}

MoveWatch::MoveWatch(NodeRunner* runner, Logger* log,
                     absl::Duration stuck_after, absl::Duration interval)
    : runner_(runner),
      log_(log),
      interval_(interval),
      tracker_(stuck_after),
      thread_([this]() { Loop(); }) {}

MoveWatch::~MoveWatch() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void MoveWatch::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), interval_)) return;
    }
    absl::StatusOr<std::vector<PartitionMove>> moves = runner_->Moving();
    if (!moves.ok()) continue;  // Closing.
    std::vector<uint32_t> again;
    const std::vector<StuckMove> stuck = tracker_.Look(
        absl::Now(), *moves, runner_->TransportStatistics(), &again);
    if (!stuck.empty())
      log_->Warn(absl::StrCat("cluster: ", DescribeStuck(stuck)));
    if (!again.empty()) {
      log_->Info(absl::StrCat("cluster: partitions ",
                              absl::StrJoin(again, ", "), " move on"));
    }
  }
}

}  // namespace bigset::server
