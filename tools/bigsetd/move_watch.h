// MoveWatch: warns when a partition's move stops making progress.
//
// A thread looks at the node's moves (NodeRunner::Moving) every few
// seconds. A move whose state has not changed for `stuck_after` (the same
// set, the same phase, the same wait) is logged once at warning level,
// with the peer's connection error if the move waits on a peer this node
// cannot reach (a certificate of another CA, a peer down), and again at
// info level once it moves on. Partitions stuck alike are reported in one
// line: a join that cannot reach its node leaves every one of its
// partitions waiting.
//
// Thread-safety: thread-safe; the destructor stops the thread.

#ifndef BIGSET_TOOLS_BIGSETD_MOVE_WATCH_H_
#define BIGSET_TOOLS_BIGSETD_MOVE_WATCH_H_

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bigset/cluster/node.h"
#include "bigset/network/node_runner.h"
#include "log.h"

namespace bigset::server {

// One stuck move, for the report (pure, tested alone).
struct StuckMove {
  uint32_t partition = 0;
  std::string state;
  NodeId peer = 0;
  std::string peer_error;  // The peer's connection error, if any.
  absl::Duration stuck_for;
};

// Tracks moves across looks: which moves keep their state for long.
class MoveTracker {
 public:
  explicit MoveTracker(absl::Duration stuck_after)
      : stuck_after_(stuck_after) {}

  // The moves seen at `now`, with the transport's view of their peers.
  // Returns the moves newly stuck (to warn of), and fills *moving_again
  // with the partitions that were reported stuck and moved on or ended.
  std::vector<StuckMove> Look(absl::Time now,
                              const std::vector<PartitionMove>& moves,
                              const TransportStats& transport,
                              std::vector<uint32_t>* moving_again);

 private:
  struct Seen {
    std::string state;
    absl::Time since;
    bool reported = false;
  };
  const absl::Duration stuck_after_;
  std::map<uint32_t, Seen> seen_;
};

// The warning line for `stuck` (non-empty): moves in one state and with
// one peer error are grouped ("partitions 3, 7 and 12 more: ...").
std::string DescribeStuck(const std::vector<StuckMove>& stuck);

class MoveWatch {
 public:
  // REQUIRES: `runner` and `log` outlive the watch.
  MoveWatch(NodeRunner* runner, Logger* log,
            absl::Duration stuck_after = absl::Seconds(60),
            absl::Duration interval = absl::Seconds(5));
  ~MoveWatch();
  MoveWatch(const MoveWatch&) = delete;
  MoveWatch& operator=(const MoveWatch&) = delete;

 private:
  void Loop();

  NodeRunner* const runner_;
  Logger* const log_;
  const absl::Duration interval_;
  MoveTracker tracker_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_MOVE_WATCH_H_
