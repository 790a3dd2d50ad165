// QuorumReadCoordinator: what the coordinators of a query and of a count
// share (query_coordinator.h, count_coordinator.h). Internal header.
//
// Such a request asks replicas of one set's serving list and waits for R
// places' answers (place_quorum.h). The base keeps the serving list and
// its places, what each node answered (its kind and reply, and the order of
// the answers), the deadline, and the client's callback; it sends the
// request again to every node asked that has not answered, each
// `retry_micros`, until the deadline, when the request fails with
// DeadlineExceeded; and it answers the client once.
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_QUORUM_READ_COORDINATOR_H_
#define BIGSET_LIB_CLUSTER_QUORUM_READ_COORDINATOR_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cluster/coordinator_host.h"
#include "cluster/place_quorum.h"

namespace bigset {

template <typename Reply, typename Result>
class QuorumReadCoordinator : public Coordinator {
 public:
  using Done = std::function<void(absl::StatusOr<Result>)>;

  void Abort(const absl::Status& status) override {
    if (!done_) return;
    Done done = std::move(done_);
    done_ = nullptr;
    done(status);
  }

 protected:
  // `what` names the request in its errors ("query", "count").
  QuorumReadCoordinator(CoordinatorHost* host, uint64_t id, std::string set,
                        const ClusterReadOptions& options, const char* what,
                        Done done)
      : Coordinator(host, id),
        set_(std::move(set)),
        partition_(host->ring().PartitionOf(set_)),
        options_(options),
        preference_(host->ServingList(partition_)),
        places_(host->ServingPlaces(partition_)),
        kinds_(preference_.size(), QuorumReply::kNone),
        replies_(preference_.size()),
        asked_(preference_.size(), true),
        what_(what),
        done_(std::move(done)) {}

  // The request's bytes (sent again as they are).
  virtual std::string RequestBytes() const = 0;
  // Takes this coordinator out of the node's requests, which destroys it.
  virtual void Release() = 0;

  // Starts the deadline and the retransmissions.
  void StartTimer() {
    deadline_ = host_->NowMicros() + options_.timeout_micros;
    ScheduleTimer();
  }

  // Records `from`'s answer: its kind (that of its error, else `kind`)
  // and the reply. Returns its preference index, or npos for a node not in
  // the list or one that answered before.
  size_t Record(NodeId from, Reply&& m, const absl::Status& status,
                QuorumReply kind) {
    const auto it = std::find(preference_.begin(), preference_.end(), from);
    if (it == preference_.end()) return npos;
    const size_t index = static_cast<size_t>(it - preference_.begin());
    if (kinds_[index] != QuorumReply::kNone) return npos;  // A duplicate.
    if (!status.ok()) {
      kinds_[index] = ReplyOfError(status);
    } else {
      kinds_[index] = kind;
      if (kind != QuorumReply::kFailed) replies_[index] = std::move(m);
    }
    order_.push_back(index);
    return index;
  }

  // R places' answers, once they are in (kWait before); kUnavailable has
  // finished the request.
  QuorumPick Pick() {
    QuorumPick pick =
        PickQuorum(places_, kinds_, order_, static_cast<size_t>(options_.r));
    if (pick.outcome == QuorumPick::Outcome::kUnavailable) {
      Finish(TooFewPlaces(what_, set_, pick.live_places, options_.r));
    }
    return pick;
  }

  // Answers the client. Destroys this.
  void Finish(absl::StatusOr<Result> result) {
    Done done = std::move(done_);
    Release();
    done(std::move(result));
  }

  static constexpr size_t npos = static_cast<size_t>(-1);

  const std::string set_;
  const uint32_t partition_;
  const ClusterReadOptions options_;
  std::vector<NodeId> preference_;
  std::vector<uint32_t> places_;  // The place of each preference_ node.
  // By preference index: what each node answered, and its reply.
  std::vector<QuorumReply> kinds_;
  std::vector<Reply> replies_;
  std::vector<size_t> order_;  // Indices, in the order they answered.
  std::vector<bool> asked_;    // By preference index.

 private:
  void ScheduleTimer() {
    After(options_.retry_micros, [this]() { OnTimer(); });
  }

  void OnTimer() {
    if (host_->NowMicros() >= deadline_) {
      Finish(absl::DeadlineExceededError(
          absl::StrCat(what_, " of set \"", set_, "\": timed out")));
      return;
    }
    const std::string bytes = RequestBytes();
    for (size_t i = 0; i < preference_.size(); ++i) {
      if (asked_[i] && kinds_[i] == QuorumReply::kNone) {
        host_->Send(preference_[i], bytes);
        ++host_->stats().retransmits;
      }
    }
    ScheduleTimer();
  }

  const char* const what_;
  Done done_;
  uint64_t deadline_ = 0;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_QUORUM_READ_COORDINATOR_H_
