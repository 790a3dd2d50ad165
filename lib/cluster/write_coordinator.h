// WriteCoordinator: the state machine of one client update or clear
// (N, W). Internal header.
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
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_WRITE_COORDINATOR_H_
#define BIGSET_LIB_CLUSTER_WRITE_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "cluster/coordinator_host.h"
#include "net/message.h"

namespace bigset {

class WriteCoordinator : public Coordinator {
 public:
  static constexpr RequestKind kKind = RequestKind::kWrite;
  RequestKind kind() const override { return kKind; }

  // Idle until Reset. The node reuses finished coordinators (and the
  // capacity of their buffers) for later writes.
  explicit WriteCoordinator(CoordinatorHost* host);

  // An update applies `ops`; a clear (`clear` set, `ops` empty) clears what
  // the clock covers. Either way the coordinating replica yields a delta.
  void Reset(uint64_t id, std::string_view set, std::vector<UpdateOp> ops,
             std::optional<Clock> clear, const ClusterWriteOptions& options,
             std::function<void(absl::StatusOr<Delta>)> done);
  // Drops what belongs to the finished write (the client's callback, its
  // ops), keeping buffer capacity.
  void Release();
  void Start();
  void Abort(const absl::Status& status) override;
  // The coordinating replica's answer, from a kUpdateReply.
  void OnUpdateReply(NodeId from, msg::UpdateReply& m);
  // An acknowledgement of the chosen delta (request id id()) or of an extra
  // delta (its own request id).
  // `applied_by` is the node that applied it: `from`, or the node `from`
  // passed it on to (it handed the partition over), which counts in its
  // own place if the write asked it too, so that W acknowledgements are W
  // distinct replicas; `from` counts too if it shares that place.
  void OnReplicateAck(uint64_t request_id, NodeId from, NodeId applied_by,
                      const absl::Status& status);
  // A given-up candidate applied the chosen delta and had coordinated the
  // write too: m.delta is its own.
  void OnReplicateAckWithDelta(NodeId from, msg::ReplicateAckWithDelta& m);
  // Called by the node's write tick: retries and the deadline.
  void OnTick(uint64_t now);

 private:
  // The coordinating replica's answer, from a message or in-process.
  void OnCoordinated(NodeId from, absl::StatusOr<Delta> result);
  void SendUpdate();
  void CoordinateLocally();
  // What Start had to put off: the client's answer, or the write's end.
  void RunDeferred();
  int IndexOf(NodeId node) const;
  void Ack(int index);
  // Sends the chosen delta to preference_[i]: kReplicateGivenUp if the
  // write gave up on it as coordinator, else kReplicate.
  void SendChosen(size_t i);
  // Replicates a given-up candidate's delta (once per candidate).
  void OnExtraDelta(int index, Delta delta);
  bool AllAcked() const;
  // At the deadline: counts a failover that could leave a dot on one
  // replica.
  void CountUnsettled();
  void MaybeFinish();
  // At the deadline: the deltas of replicas that never acknowledged them
  // go to anti-entropy as hints.
  void LeaveHints();
  // Forgets this write (the host destroys it).
  void End();
  // The client's error when fewer than W places acknowledged: by the
  // deadline, or with every replica of the list heard.
  absl::Status TooFewPlaces(bool timed_out) const;
  // Answers the client and forgets this write.
  void Finish(absl::StatusOr<Delta> result);
  // Answers the client; the write goes on replicating.
  void Reply(absl::StatusOr<Delta> result);

  std::string set_;
  uint32_t partition_ = 0;
  std::vector<NodeId> preference_;  // The serving list, at the start.
  // Preference indices, in trying order.
  absl::InlinedVector<size_t, 4> candidates_;
  size_t attempt_ = 0;
  ClusterWriteOptions options_;
  std::function<void(absl::StatusOr<Delta>)> done_;
  std::vector<UpdateOp> ops_;
  std::optional<Clock> clear_;
  std::string update_bytes_;  // Encoded when first sent to another node.
  std::string replicate_bytes_;
  std::string given_up_bytes_;  // The same delta as kReplicateGivenUp.
  bool coordinated_ = false;    // delta_ and replicate_bytes_ are set.
  int coordinator_ = -1;        // Preference index of the chosen candidate.
  Delta delta_;                 // Until handed to the client.
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
  bool refused_ = false;  // Failover refused: the client has its error.
  struct Extra {
    uint64_t id = 0;
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
  bool starting_ = false;  // Inside Start: answers are deferred.
  bool deferred_ = false;  // RunDeferred is due.
  std::optional<absl::Status> deferred_error_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_WRITE_COORDINATOR_H_
