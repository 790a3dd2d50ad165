#include "cluster/set_stream_receiver.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cluster/set_stream.h"

namespace bigset {

SetStreamReceiver::Received SetStreamReceiver::Receive(
    const SetStreamChunk& chunk, uint32_t set_partition, Replica* replica,
    uint64_t now) {
  Received out;
  const Key key{chunk.from, chunk.stream};
  if (finished_.contains(key)) {
    out.answer = absl::OkStatus();  // A retransmission: applied already.
    return out;
  }
  if (replica == nullptr) {
    out.answer = absl::UnavailableError(
        absl::StrCat("no replica of partition ", chunk.partition, " here"));
    return out;
  }
  if (set_partition != chunk.partition) {
    out.answer = absl::InvalidArgumentError(
        absl::StrCat("set does not belong to partition ", chunk.partition));
    return out;
  }
  auto it = streams_.find(key);
  if (chunk.seq == 0 &&
      (it == streams_.end() || chunk.index > it->second.index)) {
    State& fresh = Start(key, chunk, now);
    return Apply(key, fresh, chunk, replica);
  }
  if (it == streams_.end() || chunk.index > it->second.index) {
    out.answer = StreamStateLost("set stream state lost; send the set again");
    return out;
  }
  State& state = it->second;
  if (chunk.index < state.index) return out;  // An earlier set's.
  if (chunk.seq > state.next_seq) {
    if (NotePastGap(state, chunk.seq)) return out;  // No answer.
    streams_.erase(it);
    out.answer = StreamStateLost("set stream gap never filled");
    return out;
  }
  if (chunk.set != state.set) {
    streams_.erase(it);
    out.answer = StreamStateLost("set stream names another set");
    return out;
  }
  state.last_active = now;
  if (chunk.seq < state.next_seq) {
    out.answer = absl::OkStatus();  // A duplicate: applied already.
    return out;
  }
  return Apply(key, state, chunk, replica);
}

SetStreamReceiver::State& SetStreamReceiver::Start(const Key& key,
                                                   const SetStreamChunk& chunk,
                                                   uint64_t now) {
  if (!streams_.contains(key) && streams_.size() >= limits_.max_streams &&
      !streams_.empty()) {
    // The idlest goes: its sender is told Aborted and restarts the set.
    auto idlest = streams_.begin();
    for (auto i = streams_.begin(); i != streams_.end(); ++i) {
      if (i->second.last_active < idlest->second.last_active) idlest = i;
    }
    streams_.erase(idlest);
  }
  State fresh;
  fresh.partition = chunk.partition;
  fresh.index = chunk.index;
  fresh.set = std::string(chunk.set);
  fresh.last_active = now;
  return streams_.insert_or_assign(key, std::move(fresh)).first->second;
}

SetStreamReceiver::Received SetStreamReceiver::Apply(
    const Key& key, State& state, const SetStreamChunk& chunk,
    Replica* replica) {
  Received out;
  absl::Status s =
      replica->ApplyTransferChunk(chunk.set, chunk.elements, &state.tracker);
  if (s.ok() && chunk.last) {
    s = replica->FinishTransfer(chunk.set, *chunk.clock, state.tracker);
  }
  if (!s.ok()) {
    // Not applied (or only in part): the set starts over.
    streams_.erase(key);
    out.answer = std::move(s);
    return out;
  }
  ++state.next_seq;
  state.gap_low = state.gap_high = state.gap_repeats = 0;
  out.answer = absl::OkStatus();
  out.keys = chunk.elements.size();
  out.set_done = chunk.last;
  return out;
}

bool SetStreamReceiver::NotePastGap(State& state, uint64_t seq) {
  if (state.gap_high == 0) {  // The first since the last chunk applied.
    state.gap_low = state.gap_high = seq;
    return true;
  }
  if (seq >= state.gap_low && seq <= state.gap_high) {
    ++state.gap_repeats;
  } else {
    state.gap_low = std::min(state.gap_low, seq);
    state.gap_high = std::max(state.gap_high, seq);
  }
  const uint64_t chunks = state.gap_high - state.gap_low + 1;
  return state.gap_repeats / kGapRounds < chunks;  // Cannot overflow.
}

void SetStreamReceiver::Finish(NodeId from, uint64_t stream,
                               uint32_t partition) {
  const Key key{from, stream};
  streams_.erase(key);
  if (finished_.contains(key)) return;
  finished_.emplace(key, partition);
  finished_order_.push_back(key);
  while (finished_order_.size() > limits_.max_finished) {
    finished_.erase(finished_order_.front());
    finished_order_.pop_front();
  }
}

std::optional<uint32_t> SetStreamReceiver::FinishedPartition(
    NodeId from, uint64_t stream) const {
  auto it = finished_.find(Key{from, stream});
  if (it == finished_.end()) return std::nullopt;
  return it->second;
}

void SetStreamReceiver::ForgetPartition(uint32_t partition) {
  std::erase_if(streams_, [&](const auto& entry) {
    return entry.second.partition == partition;
  });
  std::erase_if(finished_order_, [&](const Key& key) {
    auto it = finished_.find(key);
    if (it == finished_.end() || it->second != partition) return false;
    finished_.erase(it);
    return true;
  });
}

void SetStreamReceiver::Expire(uint64_t now, uint64_t idle_micros) {
  std::erase_if(streams_, [&](const auto& entry) {
    const uint64_t last = entry.second.last_active;
    return now >= last && now - last >= idle_micros;
  });
}

}  // namespace bigset
