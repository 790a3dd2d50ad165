// AntiEntropy's pushes: the sender (a set's dots the peer lacks, read in
// chunks under the rate limit, one chunk in flight) and the receiver.

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cluster/anti_entropy.h"
#include "cluster/anti_entropy_internal.h"
#include "cluster/set_stream.h"
#include "cluster/set_stream_receiver.h"

namespace bigset {

using anti_entropy_internal::ChunkBytes;
using anti_entropy_internal::kMaxQueuedPushes;
using anti_entropy_internal::kMaxRestarts;
using anti_entropy_internal::kMaxRunningPushes;

bool AntiEntropy::QueuePush(NodeId peer, uint32_t partition,
                            const std::string& set, Clock dots) {
  // One push per (peer, set) at a time: the next round asks again.
  for (const auto& [id, p] : pushes_) {
    if (p->peer == peer && p->partition == partition && p->set == set) {
      return true;
    }
  }
  for (const auto& p : queued_) {
    if (p->peer == peer && p->partition == partition && p->set == set) {
      return true;
    }
  }
  if (queued_.size() >= kMaxQueuedPushes) return false;
  auto push = std::make_unique<Push>();
  push->peer = peer;
  push->partition = partition;
  push->set = set;
  push->dots = std::move(dots);
  queued_.push_back(std::move(push));
  EnsureTick();
  return true;
}

void AntiEntropy::StartQueuedPushes() {
  while (pushes_.size() < kMaxRunningPushes && !queued_.empty()) {
    std::unique_ptr<Push> push = std::move(queued_.front());
    queued_.pop_front();
    push->id = ids_->Next();
    Push* p = push.get();
    pushes_[p->id] = std::move(push);
    if (!BeginPush(p)) DropPush(p->id);
  }
}

bool AntiEntropy::BeginPush(Push* push) {
  Replica* replica = roles_->ServingReplica(push->partition);
  if (replica == nullptr) return false;
  SetReadOptions ro;
  ro.batch_size = options_.chunk_elements;
  ro.max_chunk_bytes = options_.chunk_bytes;
  absl::StatusOr<std::unique_ptr<SetReader>> reader =
      replica->Read(push->set, ro);
  if (!reader.ok()) return false;
  push->reader = std::move(*reader);
  // Only dots this snapshot has seen: a replica that lost some (power
  // loss) must not claim them, or the receiver would take them for removed.
  push->dots = Clock::Intersection(push->dots, push->reader->clock());
  push->window.Restart();
  return SendNextChunk(push);
}

bool AntiEntropy::SendNextChunk(Push* push) {
  std::vector<ElementDots>& elements = push->chunk;
  size_t n = 0;
  size_t bytes = 0;
  bool end = false;
  while (bytes < options_.chunk_bytes) {
    absl::StatusOr<bool> more = push->reader->Next(&push->batch);
    if (!more.ok()) return false;
    if (!*more) {
      end = true;
      break;
    }
    stats_->ae_keys_read += push->batch.size();
    for (ElementDots& e : push->batch) {
      std::erase_if(e.dots, [&](Dot d) { return !push->dots.Seen(d); });
      if (e.dots.empty()) continue;
      bytes += ChunkBytes(e);
      // Swapped, not moved: the batch gets back an entry with capacity.
      if (n == elements.size()) elements.emplace_back();
      std::swap(elements[n++], e);
    }
  }
  elements.resize(n);
  msg::AePush m;
  m.set = push->set;
  m.seq = push->window.next_seq();
  m.last = end;
  if (end) m.dots = push->dots;
  m.elements = std::move(elements);
  push->window.Add(end, EncodeMessage(push->id, push->partition, m));
  push->in_flight_keys = m.elements.size();
  elements = std::move(m.elements);
  push->waiting_tokens = true;
  SendInFlight(push);
  return true;
}

void AntiEntropy::SendInFlight(Push* push) {
  // Without tokens the chunk waits for a later tick: it was read from the
  // snapshot already and must be the next one sent (the last chunk's clock
  // claims every key before it was sent).
  if (!TakeTokens(push->window.bytes())) return;
  push->waiting_tokens = false;
  push->sent_at = now_;
  push->retries = 0;
  stats_->ae_keys_pushed += push->in_flight_keys;
  push->window.ForEach(
      [&](const std::string& bytes) { SendCounted(push->peer, bytes); });
}

void AntiEntropy::DropPush(uint64_t id) { pushes_.erase(id); }

void AntiEntropy::OnMessage(NodeId from, const MessageHeader& header,
                            const msg::AePushAck& m) {
  auto it = pushes_.find(header.request_id);
  if (it == pushes_.end() || it->second->peer != from) return;
  Push* push = it->second.get();
  if (push->waiting_tokens || !push->window.Holds(m.seq)) return;  // Stale.
  if (!m.status.ok()) {
    if (IsStreamStateLost(m.status) && ++push->restarts <= kMaxRestarts) {
      // The receiver lost the push's state: again from a new snapshot,
      // under a new id (never mixing two snapshots' chunks).
      std::unique_ptr<Push> again = std::move(it->second);
      pushes_.erase(it);
      again->id = ids_->Next();
      Push* p = again.get();
      pushes_[p->id] = std::move(again);
      if (!BeginPush(p)) DropPush(p->id);
      return;
    }
    ++stats_->ae_pushes_abandoned;
    pushes_.erase(it);
    StartQueuedPushes();
    return;
  }
  if (push->window.Acknowledge(m.seq)) {  // The last chunk: done.
    pushes_.erase(it);
    StartQueuedPushes();
    return;
  }
  // A chunk waiting for the rate limit is retried by the tick.
  if (!SendNextChunk(push)) {
    pushes_.erase(it);
    StartQueuedPushes();
  }
}

// ---- Pushes: the receiver.

void AntiEntropy::OnMessage(NodeId from, const MessageHeader& header,
                            msg::AePush& m) {
  const uint32_t p = header.partition;
  const SetStreamChunk chunk =  // One set per push: index 0.
      SetStreamChunk::Of(from, header, /*index=*/0, &m.dots, m);
  const SetStreamReceiver::Received r =
      receiver_.Receive(chunk, roles_->ring().PartitionOf(m.set),
                        roles_->ServingReplica(p), now_);
  if (!r.answer.has_value()) return;  // Past a gap: the sender goes back.
  stats_->ae_keys_received += r.keys;
  if (r.set_done) receiver_.Finish(from, header.request_id, p);
  SendMessage(from, header.request_id, p,
              msg::AePushAck{.status = *r.answer, .seq = m.seq});
  EnsureTick();  // Expires the state if the sender goes away.
}

}  // namespace bigset
