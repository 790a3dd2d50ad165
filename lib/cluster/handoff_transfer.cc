// HandoffTransfer: a transfer's phases, its runs, chunks and forwards (see
// handoff_transfer.h).

#include "cluster/handoff_transfer.h"

#include <iterator>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cluster/set_stream.h"

namespace bigset {

const char* HandoffTransfer::PhaseName(Phase phase) {
  // In the order of Phase.
  static constexpr const char* kNames[] = {"waiting",   "streaming",
                                           "ending",    "draining forwards",
                                           "proposing", "accepted, draining"};
  static_assert(std::size(kNames) == static_cast<size_t>(Phase::kDraining) + 1);
  return kNames[static_cast<size_t>(phase)];
}

HandoffTransfer::HandoffTransfer(uint32_t partition, NodeId to, bool supplement,
                                 const HandoffOptions* options, uint64_t now)
    : partition_(partition),
      to_(to),
      supplement_(supplement),
      options_(options),
      phase_since_(now),
      window_(options->window) {}

bool HandoffTransfer::Due(uint64_t now) const {
  return now < last_send_ || now - last_send_ >= options_->retry_micros;
}

std::string HandoffTransfer::Describe() const {
  std::string s = absl::StrCat(supplement_ ? "supplement to " : "sending to ",
                               to_, ": ", PhaseName(phase_));
  if (phase_ == Phase::kStreaming && have_set_) {
    absl::StrAppend(&s, " (set #", index_, ", run ", runs_, ")");
  }
  if (!forwards_.empty()) {
    absl::StrAppend(&s, ", ", forwards_.size(), " forwards unacknowledged");
  }
  return s;
}

void HandoffTransfer::SetPhase(Phase phase, uint64_t now) {
  if (phase_ != phase) phase_since_ = now;
  phase_ = phase;
}

void HandoffTransfer::StartRun(const TransferEnv& env) {
  if (runs_ > 0) ++env.stats->handoff_restarts;
  ++runs_;
  run_ = env.ids->Next();
  incarnation_ = 0;
  confirmed_ = false;
  probe_ = false;
  SetPhase(Phase::kStreaming, env.now);
  index_ = 0;
  have_set_ = false;
  set_.clear();
  reader_.reset();
  control_.clear();
  window_.Restart();
  backoff_until_ = 0;
  // Deltas forwarded before this run are in the snapshots it sends; the
  // ones not yet acknowledged are still retransmitted (harmless).
  NextSet(env);
}

void HandoffTransfer::NextSet(const TransferEnv& env) {
  if (env.replica == nullptr) {
    backoff_until_ = env.now + options_->retry_micros;
    return;
  }
  std::optional<std::string> after;
  if (have_set_) after = set_;
  absl::StatusOr<std::vector<std::string>> sets =
      env.replica->ListSets(std::move(after), 1);
  if (!sets.ok()) {
    backoff_until_ = env.now + options_->retry_micros;
    return;
  }
  if (sets->empty()) {
    msg::TransferChunk end;
    end.epoch = env.epoch;
    end.index = index_;
    end.end = true;
    SetPhase(Phase::kEnding, env.now);
    SendControl(env, EncodeMessage(run_, partition_, end));
    return;
  }
  set_ = std::move((*sets)[0]);
  have_set_ = true;
  OpenSet(env);
}

void HandoffTransfer::OpenSet(const TransferEnv& env) {
  SetReadOptions ro;
  ro.batch_size = options_->chunk_elements;
  ro.max_chunk_bytes = options_->chunk_bytes;
  absl::StatusOr<std::unique_ptr<SetReader>> reader =
      env.replica == nullptr ? absl::UnavailableError("no replica")
                             : env.replica->Read(set_, ro);
  if (!reader.ok()) {
    backoff_until_ = env.now + options_->retry_micros;
    return;
  }
  reader_ = std::move(*reader);
  window_.Restart();
  SendChunks(env);
}

void HandoffTransfer::SendChunks(const TransferEnv& env) {
  // Up to a window of chunks in flight: the receiver applies one while the
  // next ones travel and this node reads more.
  while (reader_ != nullptr && !window_.full()) {
    absl::StatusOr<bool> more = reader_->Next(&buffer_);
    if (!more.ok()) {
      // The set restarts later, under a new index, from a new snapshot.
      reader_.reset();
      window_.Restart();
      ++index_;
      backoff_until_ = env.now + options_->retry_micros;
      return;
    }
    const bool last = !*more || reader_->AtEnd();
    msg::TransferChunk m;
    m.epoch = env.epoch;
    m.set = set_;
    m.index = index_;
    m.seq = window_.next_seq();
    m.last = last;
    if (last) m.set_clock = reader_->clock();
    m.elements = std::move(buffer_);
    const std::string& bytes =
        window_.Add(last, EncodeMessage(run_, partition_, m));
    buffer_ = std::move(m.elements);
    last_send_ = env.now;
    env.stats->handoff_keys_sent += buffer_.size();
    env.stats->handoff_bytes_sent += bytes.size();
    if (last) reader_.reset();
    env.out->Send(to_, bytes);
  }
}

void HandoffTransfer::SendControl(const TransferEnv& env, std::string bytes) {
  control_ = std::move(bytes);
  last_send_ = env.now;
  env.out->Send(to_, control_);
}

void HandoffTransfer::Continue(const TransferEnv& env) {
  if (Waiting(env.now)) return;
  if (!control_.empty() || !window_.empty()) {
    if (Due(env.now)) Resend(env);
  } else if (reader_ != nullptr) {
    SendChunks(env);
  } else if (env.replica != nullptr && have_set_) {
    // The set whose read failed, again (NextSet goes on after set_).
    OpenSet(env);
  } else {
    NextSet(env);
  }
}

void HandoffTransfer::Resend(const TransferEnv& env) {
  last_send_ = env.now;
  ++silent_;
  ++env.stats->retransmits;
  if (!control_.empty()) {
    env.out->Send(to_, control_);
    return;
  }
  // Go-back-N: the receiver applies chunks in order and ignores those past
  // a gap, so every unacknowledged chunk goes again.
  window_.ForEach([&](const std::string& bytes) { env.out->Send(to_, bytes); });
}

HandoffTransfer::AckResult HandoffTransfer::OnAck(const TransferEnv& env,
                                                  uint64_t request_id,
                                                  const msg::TransferAck& m) {
  if (phase_ == Phase::kEnding) {
    if (run_ != request_id || control_.empty() || m.index != index_ ||
        m.seq != 0) {
      return AckResult::kIgnored;
    }
  } else if (phase_ != Phase::kStreaming || run_ != request_id ||
             m.index != index_ || !window_.Holds(m.seq)) {
    return AckResult::kIgnored;
  }
  silent_ = 0;
  if (incarnation_ == 0) {
    incarnation_ = m.incarnation;
  } else if (m.incarnation != incarnation_) {
    // The receiver restarted since it acknowledged this run's first chunks:
    // with unsynced writes, a power loss may have taken them. The whole run
    // again (a completion needs a run received in one incarnation).
    ++env.stats->handoff_receiver_restarts;
    StartRun(env);
    return AckResult::kProgress;
  }
  if (m.status.ok()) {
    backoff_until_ = 0;
    if (phase_ == Phase::kEnding) {
      control_.clear();
      SetPhase(Phase::kSetsDone, env.now);
      return AckResult::kSetsDone;
    }
    // The receiver applies in order: this chunk and every one before it.
    if (window_.Acknowledge(m.seq)) {
      ++index_;
      NextSet(env);
    } else {
      SendChunks(env);
    }
    return AckResult::kProgress;
  }
  if (IsStreamStateLost(m.status)) {
    // The receiver lost the set's state (it restarted, or expired it): the
    // set again, from a new snapshot, under a new index.
    ++env.stats->handoff_restarts;
    control_.clear();
    window_.Restart();
    reader_.reset();
    ++index_;
    OpenSet(env);
    return AckResult::kProgress;
  }
  // Not ready (an older ring there, no replica yet) or refused: the same
  // chunk again later.
  backoff_until_ = env.now + 5 * options_->retry_micros;
  return AckResult::kProgress;
}

void HandoffTransfer::Forward(const TransferEnv& env, const Delta& delta) {
  // A run not started yet reads its sets after this delta: nothing to
  // forward (and no queue per waiting transfer).
  if (phase_ == Phase::kWaiting || phase_ == Phase::kDraining) return;
  const uint64_t id = env.ids->Next();
  std::string bytes;
  EncodeDeltaMessage(MessageHeader{MessageType::kHandoffDelta, id, partition_},
                     delta, &bytes);
  // While a proposal is out the receiver may accept the run: its forwards
  // must all arrive, so the bound waits (the proposal is one round trip).
  if (phase_ != Phase::kProposing &&
      forward_bytes_ + bytes.size() > options_->forward_bytes) {
    // Over the bound: drop the queue; a new run sends every set again
    // (from snapshots taken after these deltas were applied).
    forwards_.clear();
    forward_bytes_ = 0;
    ++env.stats->handoff_forward_overflows;
    StartRun(env);
    return;
  }
  forward_bytes_ += bytes.size();
  env.out->Send(to_, bytes);
  ++env.stats->handoff_deltas_forwarded;
  forwards_.emplace(id, std::move(bytes));
}

void HandoffTransfer::ForwardAcked(uint64_t request_id) {
  auto f = forwards_.find(request_id);
  if (f == forwards_.end()) return;  // Not this transfer's: no news of it.
  silent_ = 0;
  forward_bytes_ -= f->second.size();
  forwards_.erase(f);
}

void HandoffTransfer::ResendForwards(ProtocolOutput* out) const {
  for (const auto& [id, bytes] : forwards_) out->Send(to_, bytes);
}

void HandoffTransfer::Propose(const TransferEnv& env, std::string proposal) {
  probe_ = false;
  SetPhase(Phase::kProposing, env.now);
  SendControl(env, std::move(proposal));
}

void HandoffTransfer::StartProbe(const TransferEnv& env) {
  run_ = env.ids->Next();
  probe_ = true;
  reader_.reset();
  SetPhase(Phase::kProposing, env.now);
}

void HandoffTransfer::SendProbe(const TransferEnv& env, std::string proposal) {
  SendControl(env, std::move(proposal));
}

void HandoffTransfer::Confirm(const TransferEnv& env, std::string proposal) {
  SendControl(env, std::move(proposal));
}

HandoffTransfer::Answer HandoffTransfer::TakeAnswer(uint64_t request_id) {
  if (run_ != request_id) return Answer::kIgnored;
  if (phase_ == Phase::kDraining && !control_.empty()) {
    control_.clear();
    return Answer::kConfirmation;
  }
  if (phase_ != Phase::kProposing) return Answer::kIgnored;
  control_.clear();
  silent_ = 0;
  return Answer::kProposal;
}

void HandoffTransfer::ProbeAnswered(uint64_t now) {
  probe_ = false;
  SetPhase(Phase::kSetsDone, now);
}

void HandoffTransfer::Refused(uint64_t now) {
  SetPhase(Phase::kSetsDone, now);
  backoff_until_ = now + 5 * options_->retry_micros;
}

}  // namespace bigset
