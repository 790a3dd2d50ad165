// HandoffTransfer: one hand-off transfer, of one partition from this node
// to one receiver, as a state machine. Internal header (handoff.h gives the
// protocol; docs/ARCHITECTURE.md, "Membership and hand-off").
//
// The transfer owns its phase and its data stream. A run reads every set
// of the partition in order, each from a new snapshot, and sends it in
// chunks (up to HandoffOptions::window in flight, all of them again on a
// resend: the receiver ignores chunks past a gap), then one end chunk.
// Meanwhile every delta the partition's replica applies is forwarded under
// a request id of its own and kept until acknowledged. Phases:
//
//   kWaiting --StartRun--> kStreaming --(every set)--> kEnding
//     --(end acknowledged)--> kSetsDone --Propose--> kProposing
//     --Accepted--> kDraining --(forwards drained, confirmed)--> done
//
// A run restarts (a new request id, every set again) when the receiver
// restarted since acknowledging the run (another incarnation in its
// acknowledgements) and when the forwards outgrow their bound; one set
// restarts, under a new index, when the receiver lost its state.
//
// What commits this node's membership state (proposing, completing,
// probing a receiver the ring no longer wants) belongs to HandoffManager:
// it builds those messages and hands them to the transfer to send and
// retransmit, and reads the transfer's phase and answers to decide.
//
// No I/O: every input takes a TransferEnv (the time, the partition's
// replica as of now, where the sends go) and appends its sends to
// env.out in the order it makes them. Results say what the caller does
// next. Thread-safety: not thread-safe; owned by the node's HandoffManager.

#ifndef BIGSET_LIB_CLUSTER_HANDOFF_TRANSFER_H_
#define BIGSET_LIB_CLUSTER_HANDOFF_TRANSFER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bigset/cluster/node_options.h"
#include "bigset/replica/replica.h"
#include "bigset/replica/set_reader.h"
#include "cluster/node_counters.h"
#include "cluster/protocol_output.h"
#include "cluster/request_ids.h"
#include "cluster/set_stream_window.h"
#include "net/message.h"

namespace bigset {

// What one input of a transfer needs from its node. Nothing owned.
struct TransferEnv {
  uint64_t now = 0;
  uint64_t epoch = 0;          // The latest ring's (chunks carry it).
  Replica* replica = nullptr;  // This node's, of the partition; or none.
  RequestIds* ids = nullptr;   // Run and forward request ids.
  NodeCounters* stats = nullptr;
  ProtocolOutput* out = nullptr;  // The sends go here, in order.
};

class HandoffTransfer {
 public:
  enum class Phase {
    kWaiting,    // Its turn has not come (HandoffOptions::max_running).
    kStreaming,  // Sending sets, up to a window of chunks in flight.
    kEnding,     // The end chunk (after every set) in flight.
    kSetsDone,   // The end acknowledged; forwards draining.
    kProposing,  // Committed to the receiver; the proposal in flight.
    kDraining,   // Accepted: the last forwards drain, then done.
  };
  static const char* PhaseName(Phase phase);

  // `options` (not owned) outlives the transfer. A supplement adds this
  // node's data to the node that took its place already (handoff.h).
  HandoffTransfer(uint32_t partition, NodeId to, bool supplement,
                  const HandoffOptions* options, uint64_t now);
  HandoffTransfer(const HandoffTransfer&) = delete;
  HandoffTransfer& operator=(const HandoffTransfer&) = delete;

  uint32_t partition() const { return partition_; }
  NodeId to() const { return to_; }
  bool supplement() const { return supplement_; }
  Phase phase() const { return phase_; }
  // The request id of the current run (or probe); 0 before the first.
  uint64_t run() const { return run_; }
  // The proposal in flight only asks whether the receiver took this node's
  // place (see HandoffManager::Probe).
  bool probe() const { return probe_; }
  // The receiver answered the confirmation: everything it was forwarded
  // is durable there.
  bool confirmed() const { return confirmed_; }
  // Sends in a row that got no answer (a receiver gone for good).
  uint64_t silent() const { return silent_; }
  bool forwards_empty() const { return forwards_.empty(); }
  size_t forward_bytes() const { return forward_bytes_; }
  bool control_in_flight() const { return !control_.empty(); }
  uint64_t phase_since() const { return phase_since_; }
  // Backing off (a failed read, a receiver not ready, a refusal).
  bool Waiting(uint64_t now) const { return now < backoff_until_; }
  // The last send is a retry interval old (or the clock went back).
  bool Due(uint64_t now) const;
  // What it is doing, for Node::Moving ("sending to 3: streaming (set #4,
  // run 1), 2 forwards unacknowledged").
  std::string Describe() const;

  // ---- The data stream.
  // A new run: a new request id, every set again from the first.
  void StartRun(const TransferEnv& env);
  // From the node's tick while streaming or ending: resends what is due,
  // reads on, or opens the set whose read failed, unless backing off.
  void Continue(const TransferEnv& env);
  // An acknowledgement of a chunk of run `request_id`.
  enum class AckResult {
    kIgnored,   // Stale or a duplicate.
    kProgress,  // The stream moved on (or restarted, or backs off).
    kSetsDone,  // The end was acknowledged: the run is received whole.
  };
  AckResult OnAck(const TransferEnv& env, uint64_t request_id,
                  const msg::TransferAck& m);
  // A delta the partition's replica applied: forwarded unless the run has
  // not started (it reads its sets later) or the receiver accepted.
  void Forward(const TransferEnv& env, const Delta& delta);
  bool HasForward(uint64_t request_id) const {
    return forwards_.count(request_id) > 0;
  }
  // The receiver applied forward `request_id` (or can never apply it): it
  // leaves the queue. Nothing for an id not in the queue.
  void ForwardAcked(uint64_t request_id);
  // Every forward not yet acknowledged, again (the tick).
  void ResendForwards(ProtocolOutput* out) const;
  // What is in flight again: the proposal or confirmation, else every
  // chunk of the window.
  void Resend(const TransferEnv& env);

  // ---- The hand-over (messages built by HandoffManager).
  // Sends `proposal` (this run's HandoffDone): kProposing.
  void Propose(const TransferEnv& env, std::string proposal);
  // Takes a new request id for a probe, under which the receiver cannot
  // have received a run, and sends `proposal` built with it: kProposing.
  void StartProbe(const TransferEnv& env);
  void SendProbe(const TransferEnv& env, std::string proposal);
  // Sends `proposal` again once accepted and drained: the receiver answers
  // it after a synced write.
  void Confirm(const TransferEnv& env, std::string proposal);
  // An answer (HandoffDoneAck) to run `request_id`.
  enum class Answer {
    kIgnored,       // Not to what is in flight.
    kConfirmation,  // To the confirmation (kDraining).
    kProposal,      // To the proposal or probe (kProposing).
  };
  Answer TakeAnswer(uint64_t request_id);
  // The outcomes of an answer, each a transition.
  void Confirmed() { confirmed_ = true; }
  void Accepted(uint64_t now) { SetPhase(Phase::kDraining, now); }
  void ProbeAnswered(uint64_t now);
  // The receiver will not take the place now: proposed again later.
  void Refused(uint64_t now);
  void BackOff(uint64_t until) { backoff_until_ = until; }

 private:
  void SetPhase(Phase phase, uint64_t now);
  // Opens the set after set_ (or the first), or sends the end.
  void NextSet(const TransferEnv& env);
  // Reads set_ from a new snapshot and sends its first chunks (or backs
  // off if it cannot be read).
  void OpenSet(const TransferEnv& env);
  void SendChunks(const TransferEnv& env);
  void SendControl(const TransferEnv& env, std::string bytes);

  const uint32_t partition_;
  const NodeId to_;
  const bool supplement_;
  const HandoffOptions* const options_;
  Phase phase_ = Phase::kWaiting;
  uint64_t phase_since_;  // When the phase began (for Moving()).
  bool probe_ = false;
  bool confirmed_ = false;
  uint64_t run_ = 0;
  uint64_t runs_ = 0;
  // The receiver's incarnation in the run's first acknowledgement.
  uint64_t incarnation_ = 0;
  uint64_t index_ = 0;     // Position of set_ in the run.
  bool have_set_ = false;  // set_ names a set of this run ("" is a name).
  std::string set_;
  std::unique_ptr<SetReader> reader_;
  std::vector<ElementDots> buffer_;  // Reused between chunks.
  // The set's chunks sent and not yet acknowledged.
  SetStreamWindow window_;
  // The end chunk, proposal or confirmation sent and not answered.
  std::string control_;
  uint64_t last_send_ = 0;
  uint64_t backoff_until_ = 0;
  uint64_t silent_ = 0;
  // Forwarded deltas not yet acknowledged: request id -> message.
  std::map<uint64_t, std::string> forwards_;
  size_t forward_bytes_ = 0;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_HANDOFF_TRANSFER_H_
