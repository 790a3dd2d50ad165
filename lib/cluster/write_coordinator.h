// WriteCoordinator: the state machine of one client update or clear
// (N, W), outputs out (request_output.h). Internal header.
//
// One replica of the set's preference list coordinates the update (this
// node's own replica if it has one, in-process; otherwise the list in
// order, each candidate asked a few times before the next), which yields
// the delta; the delta goes to the other replicas, and the client is
// answered after W acknowledgements (the coordinator's included), always
// from the scheduler, never from inside Node::Update. Replicas that have not
// acknowledged keep getting the delta until they do or the deadline passes.
//
// Failover (ClusterWriteOptions::failover): a candidate given up on may have
// applied the write. It gets the chosen delta as kReplicateGivenUp, which it
// answers with its own delta if it coordinated the write (else it fences the
// request: a delayed copy is refused). A given-up candidate's delta, from
// that answer or from a late kUpdateReply, is an extra delta: replicated
// under a request id of its own to every other replica, acknowledged and
// retransmitted like the chosen one; the write ends when every delta is
// acknowledged by every replica, or at its deadline (extended by one
// timeout for each extra delta).
//
// The machine does no I/O: Start, Step (the coordinating replica's reply,
// a given-up candidate's delta), Acknowledged, Coordinated (the outcome of
// this node's own replica coordinating, which an output asked the driver
// for with `coordinate_here`), NumberExtra (a request id for an extra
// delta, asked for with `extras_to_number`) and Tick return what the
// driver is to do. Ticks come from the driver's one timer for every
// running write (retries and the deadline); a write's outputs ask for
// none. The driver answers the client from the scheduler when the answer
// comes within the client's own call (Node::Update).
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_WRITE_COORDINATOR_H_
#define BIGSET_LIB_CLUSTER_WRITE_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "bigset/cluster/node.h"
#include "cluster/coordinator.h"
#include "cluster/request_output.h"
#include "net/message.h"

namespace bigset {

class WriteCoordinator : public CoordinatorOf<RequestKind::kWrite> {
 public:
  using Done = std::function<void(absl::StatusOr<Delta>)>;

  // Where the write stands. Whether the client was answered is apart
  // (answered()): a write refused while asking is answered before a late
  // delta makes it replicate, and a replicating one is answered once W
  // places have its delta, then goes on to the rest.
  //
  //   kIdle --Start--> kAsking --(a candidate's delta)--> kReplicating
  //   kAsking --(the candidate silent, failover off)--> kAwaitingLate
  //   kAwaitingLate --(its late delta)--> kReplicating
  //
  // Any phase ends (an output's `done`) at the deadline; kAsking also on a
  // candidate's error other than Unavailable, and kReplicating once every
  // replica acknowledged every delta.
  enum class Phase {
    kIdle,          // Reset, not started.
    kAsking,        // Candidates asked in turn to coordinate; no delta yet.
    kAwaitingLate,  // Failover off and the candidate silent: the client
                    // has its error; a late delta is still replicated.
    kReplicating,   // A candidate's delta (and extra deltas of candidates
                    // given up on) going to every replica.
  };
  static const char* PhaseName(Phase phase);

  // Where a write runs: its set's partition, the nodes serving it and their
  // places (HandoffManager::ServingList, ServingPlaces), and this node.
  // Reset copies the lists into the capacity a recycled machine kept.
  struct Where {
    uint32_t partition = 0;
    const std::vector<NodeId>& serving;
    const std::vector<uint32_t>& places;
    NodeId self = 0;
  };

  // The client's answer: a call of its callback.
  struct Answer {
    Done done;
    absl::StatusOr<Delta> result;
    void operator()() {
      if (done) done(std::move(result));
    }
  };

  // Idle until Reset. The node reuses finished machines (and the capacity
  // of their buffers) for later writes.
  WriteCoordinator() : CoordinatorOf(0) {}

  // An update applies `ops`; a clear (`clear` set, `ops` empty) clears what
  // the clock covers. Either way the coordinating replica yields a delta.
  void Reset(uint64_t id, std::string_view set, const Where& where,
             std::vector<UpdateOp> ops, std::optional<Clock> clear,
             const ClusterWriteOptions& options, Done done);
  // Drops what belongs to the finished write (the client's callback, its
  // ops), keeping buffer capacity.
  void Release();

  // Asks the first candidate to coordinate (or fails at once: fewer than
  // W places serve the partition).
  RequestOutput Start(uint64_t now);
  // The outcome of this node's own replica coordinating the write (what
  // an output's `coordinate_here` asked for).
  RequestOutput Coordinated(absl::StatusOr<Delta> result);
  // The coordinating replica's answer, from a kUpdateReply.
  RequestOutput Step(NodeId from, msg::UpdateReply& m);
  // A given-up candidate applied the chosen delta and had coordinated the
  // write too: m.delta is its own.
  RequestOutput Step(NodeId from, msg::ReplicateAckWithDelta& m);
  // An acknowledgement of the chosen delta (request id id()) or of an extra
  // delta (its own request id).
  // `applied_by` is the node that applied it: `from`, or the node `from`
  // passed it on to (it handed the partition over), which counts in its
  // own place if the write asked it too, so that W acknowledgements are W
  // distinct replicas; `from` counts too if it shares that place.
  // `givers` are the nodes whose place `applied_by` took, directly or
  // through nodes that handed it on (MembershipState::PlaceGivers): each
  // that the list holds as another place (it came from a view that had
  // not heard of the move) counts as one place with applied_by from now
  // on, so that an acknowledgement of the node that handed its place over
  // and one of its taker are not two places.
  RequestOutput Acknowledged(uint64_t request_id, NodeId from,
                             NodeId applied_by, std::span<const NodeId> givers,
                             const absl::Status& status);
  // The request id of the oldest extra delta without one (REQUIRES: an
  // output asked for it); sends it. `now` extends the write's deadline by
  // a timeout for it to spread.
  RequestOutput NumberExtra(uint64_t extra_id, uint64_t now);
  // Retries and the deadline.
  RequestOutput Tick(uint64_t now);
  // The answer an output said is ready (`answered`); one that does
  // nothing if there is none (a `done` output after the answer was taken).
  Answer TakeAnswer();
  void Abort(const absl::Status& status) override;

  Phase phase() const { return phase_; }
  // The client's answer is decided (an output said `answered`).
  bool answered() const { return replied_; }

  // What `coordinate_here` applies.
  const std::string& set() const { return set_; }
  uint32_t partition() const { return partition_; }
  const std::vector<UpdateOp>& ops() const { return ops_; }
  const std::optional<Clock>& clear() const { return clear_; }

 private:
  // The coordinating replica's answer, from a message or in-process.
  void OnCoordinated(NodeId from, absl::StatusOr<Delta> result,
                     RequestOutput* out);
  void SendUpdate(RequestOutput* out);
  int IndexOf(NodeId node) const;
  void Ack(int index);
  // Makes the places of list indices `a` and `b` one (named by the
  // smallest index of its nodes), and counts the acknowledged places
  // again.
  void MergePlaces(size_t a, size_t b);
  // Sends the chosen delta to preference_[i]: kReplicateGivenUp if the
  // write gave up on it as coordinator, else kReplicate.
  void SendChosen(size_t i, RequestOutput* out);
  // Takes a given-up candidate's delta (once per candidate); it goes out
  // once numbered.
  void OnExtraDelta(int index, Delta delta, RequestOutput* out);
  bool AllAcked() const;
  // At the deadline: counts a failover that could leave a dot on one
  // replica.
  void CountUnsettled(RequestOutput* out) const;
  void MaybeFinish(RequestOutput* out);
  // At the deadline: the deltas of replicas that never acknowledged them
  // go to anti-entropy as hints.
  void LeaveHints(RequestOutput* out) const;
  // The write is over: the driver drops it.
  void End(RequestOutput* out) const;
  bool coordinated() const { return phase_ == Phase::kReplicating; }
  // The client's error when fewer than W places acknowledged: by the
  // deadline, or with every replica of the list heard.
  absl::Status TooFewPlaces(bool timed_out) const;
  // Decides the client's answer; the write may go on replicating.
  void Reply(absl::StatusOr<Delta> result, RequestOutput* out);

  std::string set_;
  uint32_t partition_ = 0;
  NodeId self_ = 0;
  std::vector<NodeId> preference_;  // The serving list, at the start.
  // Preference indices, in trying order.
  absl::InlinedVector<size_t, 4> candidates_;
  size_t attempt_ = 0;
  ClusterWriteOptions options_;
  Done done_;
  Phase phase_ = Phase::kIdle;
  bool replied_ = false;  // The answer is decided (answer_, then taken).
  std::optional<absl::StatusOr<Delta>> answer_;
  std::vector<UpdateOp> ops_;
  std::optional<Clock> clear_;
  std::string update_bytes_;  // Encoded when first sent to another node.
  std::string replicate_bytes_;
  std::string given_up_bytes_;  // The same delta as kReplicateGivenUp.
  // Set in kReplicating: the chosen candidate's preference index, its
  // delta (until handed to the client) and replicate_bytes_.
  int coordinator_ = -1;
  Delta delta_;
  // Per preference index (any N, not a fixed-width mask): acknowledged the
  // chosen delta; was asked to coordinate; answered in a way that settles
  // whether it coordinated (a reply, or an acknowledgement of the chosen
  // delta as a given-up candidate); its extra delta was taken.
  absl::InlinedVector<bool, 8> acked_;
  absl::InlinedVector<bool, 8> asked_;
  absl::InlinedVector<bool, 8> heard_;
  absl::InlinedVector<bool, 8> extra_taken_;
  int acks_ = 0;
  // The place of each preference index (a leaver and the node that took
  // its place share one: the leaver's data ends up on the taker alone), and
  // the places every node of which acknowledged: W counts places.
  absl::InlinedVector<uint32_t, 8> places_;
  absl::InlinedVector<bool, 8> place_acked_;
  int place_acks_ = 0;
  struct Extra {
    uint64_t id = 0;  // 0 until numbered (NumberExtra).
    int index = 0;    // The given-up candidate whose delta it is.
    Delta delta;      // Until numbered.
    std::string bytes;
    absl::InlinedVector<bool, 8> acked;
    int acks = 0;
  };
  std::vector<Extra> extras_;
  uint64_t deadline_ = 0;         // The write's end (extra deltas extend it).
  uint64_t client_deadline_ = 0;  // The client's answer: start + timeout.
  uint64_t next_retry_ = 0;
  // Rounds of retransmissions to the preference list so far (back-off).
  int retransmit_rounds_ = 0;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_WRITE_COORDINATOR_H_
