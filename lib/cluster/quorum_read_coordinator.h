// QuorumReadCoordinator: what the state machines of a query and of a count
// share (query_coordinator.h, count_coordinator.h). Internal header.
//
// Such a request asks replicas of one set's serving list and waits for R
// places' answers (place_quorum.h). The base keeps the serving list and
// its places, what each node answered (its kind and reply, and the order of
// the answers), the deadline, and the client's callback; at each Tick it
// sends the request again to every node asked that has not answered, first
// after `retry_micros`, then each round after twice as long as the one
// before (up to 8x), until the deadline, when the request fails with
// DeadlineExceeded. The back-off is for a replica that is slow rather than
// one that lost a message: it works through every copy it is sent (a query
// of 100,000 members each time), so a fixed interval sent a replica that
// took a second per query five copies of each and kept it behind (a
// bigsetd of pipelined 100,000-member SMISMEMBERs: 158 retransmissions for
// 50 commands on a loaded machine, ten per query under the sanitizers).
//
// Its phase is explicit (Phase): idle until Start; asking some replicas
// (R places, the others held back until a query's hedge); asking all of
// them; answered. The machines do no I/O: Start, Step (a reply) and Tick
// return what the driver is to do (request_output.h). Once an output says
// `done`, the driver takes the answer (TakeAnswer), drops the machine, and runs
// the answer, which calls the client's callback.
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_QUORUM_READ_COORDINATOR_H_
#define BIGSET_LIB_CLUSTER_QUORUM_READ_COORDINATOR_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "bigset/cluster/node.h"
#include "cluster/coordinator.h"
#include "cluster/place_quorum.h"
#include "cluster/request_output.h"

namespace bigset {

// Where a quorum read runs: the set's partition, the nodes serving it and
// their places (HandoffManager::ServingList, ServingPlaces), this node,
// and the time it starts.
struct QuorumReadSetup {
  uint32_t partition = 0;
  std::vector<NodeId> serving;
  std::vector<uint32_t> places;
  NodeId self = 0;
  uint64_t now = 0;
};

// A query's or count's machine, of kind K.
template <typename Reply, typename Result, RequestKind K>
class QuorumReadCoordinator : public CoordinatorOf<K> {
 public:
  using Done = std::function<void(absl::StatusOr<Result>)>;

  // Where the request is. kIdle: not started. kAskingSome: R places asked,
  // the others held back until the hedge (a query's; see its Start).
  // kAskingAll: every replica asked; waiting for R places' answers.
  // kAnswered: the answer is ready (an output said `done`); every later
  // input is ignored.
  enum class Phase { kIdle, kAskingSome, kAskingAll, kAnswered };
  Phase phase() const { return phase_; }

  void Abort(const absl::Status& status) override {
    if (!done_) return;
    Done done = std::move(done_);
    done_ = nullptr;
    done(status);
  }

  // The time has come for a tick that an output asked for (or later).
  RequestOutput Tick(uint64_t now) {
    RequestOutput out;
    if (phase_ == Phase::kIdle || phase_ == Phase::kAnswered) return out;
    if (now >= deadline_) {
      Finish(absl::DeadlineExceededError(
                 absl::StrCat(what_, " of set \"", set_, "\": timed out")),
             &out);
      return out;
    }
    OnTick(now, &out);
    if (now >= next_retry_) {
      const std::string bytes = RequestBytes();
      for (size_t i = 0; i < preference_.size(); ++i) {
        if (asked_[i] && kinds_[i] == QuorumReply::kNone) {
          out.Add(preference_[i], bytes);
          ++out.retransmits;
        }
      }
      ++retransmit_rounds_;
      next_retry_ =
          now + (options_.retry_micros << std::min(retransmit_rounds_, 3));
    }
    out.tick_at = NextTick();
    return out;
  }

  // REQUIRES: an output said `done`, and TakeAnswer was not called yet.
  // The client's answer: a call of its callback (nothing if Abort answered
  // it already).
  std::function<void()> TakeAnswer() {
    return [done = std::move(done_), result = std::move(*result_)]() mutable {
      if (done) done(std::move(result));
    };
  }

 protected:
  // `what` names the request in its errors ("query", "count").
  QuorumReadCoordinator(uint64_t id, std::string set, QuorumReadSetup setup,
                        const ClusterReadOptions& options, const char* what,
                        Done done)
      : CoordinatorOf<K>(id),
        set_(std::move(set)),
        partition_(setup.partition),
        self_(setup.self),
        options_(options),
        preference_(std::move(setup.serving)),
        places_(std::move(setup.places)),
        kinds_(preference_.size(), QuorumReply::kNone),
        replies_(preference_.size()),
        asked_(preference_.size(), true),
        what_(what),
        done_(std::move(done)) {}

  // The request's bytes (sent again as they are).
  virtual std::string RequestBytes() const = 0;
  // What else a tick does before the retransmissions (a query's hedge).
  virtual void OnTick(uint64_t /*now*/, RequestOutput* /*out*/) {}
  // The earliest time the derived machine needs a tick (UINT64_MAX: none).
  virtual uint64_t DerivedTickAt() const { return UINT64_MAX; }

  // Starts the deadline and the retransmissions; asks for the first tick.
  // REQUIRES: `asked_` says whom Start asked.
  void StartTimer(uint64_t now, RequestOutput* out) {
    phase_ = std::all_of(asked_.begin(), asked_.end(), [](bool a) { return a; })
                 ? Phase::kAskingAll
                 : Phase::kAskingSome;
    deadline_ = now + options_.timeout_micros;
    next_retry_ = now + options_.retry_micros;
    out->tick_at = NextTick();
  }

  // Records `from`'s answer: its kind (that of its error, else `kind`)
  // and the reply. Returns its preference index, or npos for a node not in
  // the list, one that answered before, or any once answered.
  size_t Record(NodeId from, Reply&& m, const absl::Status& status,
                QuorumReply kind) {
    if (phase_ == Phase::kIdle || phase_ == Phase::kAnswered) return npos;
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
  QuorumPick Pick(RequestOutput* out) {
    QuorumPick pick =
        PickQuorum(places_, kinds_, order_, static_cast<size_t>(options_.r));
    if (pick.outcome == QuorumPick::Outcome::kUnavailable) {
      Finish(TooFewPlaces(what_, set_, pick.live_places, options_.r), out);
    }
    return pick;
  }

  // Every replica has been asked now (after kAskingSome).
  void AskedAll() {
    if (phase_ == Phase::kAskingSome) phase_ = Phase::kAskingAll;
  }

  // The request's answer; the output says it is done.
  void Finish(absl::StatusOr<Result> result, RequestOutput* out) {
    phase_ = Phase::kAnswered;
    result_ = std::move(result);
    out->done = true;
    out->tick_at = 0;
  }

  static constexpr size_t npos = static_cast<size_t>(-1);

  const std::string set_;
  const uint32_t partition_;
  const NodeId self_;
  const ClusterReadOptions options_;
  std::vector<NodeId> preference_;
  std::vector<uint32_t> places_;  // The place of each preference_ node.
  // By preference index: what each node answered, and its reply.
  std::vector<QuorumReply> kinds_;
  std::vector<Reply> replies_;
  std::vector<size_t> order_;  // Indices, in the order they answered.
  std::vector<bool> asked_;    // By preference index.

 private:
  uint64_t NextTick() const {
    return std::min({next_retry_, deadline_, DerivedTickAt()});
  }

  const char* const what_;
  Phase phase_ = Phase::kIdle;
  Done done_;
  std::optional<absl::StatusOr<Result>> result_;
  uint64_t deadline_ = 0;
  uint64_t next_retry_ = 0;
  int retransmit_rounds_ = 0;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_QUORUM_READ_COORDINATOR_H_
