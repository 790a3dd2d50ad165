// The read coordinator (streaming R-way merge with read repair, used by
// Read, Range and Count) and the membership query coordinator.

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "node_impl.h"

namespace bigset {
namespace {

// Continuation tokens of cluster ranges: version byte + last element (the
// same format as Replica::Range's).
constexpr char kContinuationVersion = 0x01;

void SendRepair(Node::Impl* node, NodeId to, uint32_t partition,
                const std::string& set, std::vector<DeltaOp> ops) {
  Message m = NewMessage(MessageType::kRepair, 0, partition);
  m.delta.set = set;
  m.delta.ops = std::move(ops);
  ++node->stats().repairs_sent;
  node->stats().repair_ops_sent += m.delta.ops.size();
  node->Send(to, m);
}

}  // namespace

ReadOp::ReadOp(Node::Impl* node, uint64_t id, std::string set,
               const ClusterReadOptions& options,
               std::optional<std::string> start, bool start_inclusive,
               std::optional<std::string> end, bool end_inclusive, size_t limit,
               std::unique_ptr<ReadSink> sink)
    : node_(node),
      id_(id),
      set_(std::move(set)),
      partition_(node->ring().PartitionOf(set_)),
      options_(options),
      start_(std::move(start)),
      start_inclusive_(start_inclusive),
      end_(std::move(end)),
      end_inclusive_(end_inclusive),
      limit_(limit),
      sink_(std::move(sink)) {
  for (NodeId n : node->ring().PreferenceList(partition_)) {
    slots_.emplace_back().node = n;
  }
}

ReadOp::Slot* ReadOp::SlotOf(NodeId node) {
  for (Slot& s : slots_) {
    if (s.node == node) return &s;
  }
  return nullptr;
}

void ReadOp::SendRead(const Slot& slot) {
  Message m = NewMessage(MessageType::kRead, id_, partition_);
  m.set = set_;
  m.start = start_;
  m.start_inclusive = start_inclusive_;
  m.end = end_;
  m.end_inclusive = end_inclusive_;
  m.batch_size = options_.batch_size;
  node_->Send(slot.node, m);
}

void ReadOp::Start() {
  last_progress_ = node_->scheduler()->NowMicros();
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!OpenLocal(i)) SendRead(slots_[i]);
  }
  ScheduleTimer();
}

bool ReadOp::OpenLocal(size_t i) {
  Slot& slot = slots_[i];
  if (slot.node != node_->id()) return false;
  Replica* replica = node_->LocalReplica(partition_);
  if (replica == nullptr) return false;
  SetReadOptions ro;
  ro.batch_size = options_.batch_size;
  ro.start = start_;
  ro.start_inclusive = start_inclusive_;
  ro.end = end_;
  ro.end_inclusive = end_inclusive_;
  absl::StatusOr<std::unique_ptr<SetReader>> reader = replica->Read(set_, ro);
  if (!reader.ok()) return false;
  slot.local = std::move(*reader);
  // Its clock "arrives" like the others: asynchronously.
  const uint64_t id = id_;
  Node::Impl* node = node_;
  node_->After(0, [node, id, i]() {
    if (ReadOp* op = node->FindRead(id)) op->OnLocalClock(i);
  });
  return true;
}

void ReadOp::OnLocalClock(size_t i) {
  Message m;
  m.type = MessageType::kReadClock;
  m.clock = slots_[i].local->clock();
  OnClock(slots_[i].node, m);
}

absl::Status ReadOp::FillLocal(Slot& slot) {
  std::vector<ElementDots>* buffer = merger_->RefillBuffer(slot.merger_index);
  absl::StatusOr<bool> more = slot.local->Next(buffer);
  if (!more.ok()) return more.status();
  merger_->Refilled(slot.merger_index, !*more || slot.local->AtEnd());
  Fed(slot);
  return absl::OkStatus();
}

void ReadOp::OnClock(NodeId from, Message& m) {
  Slot* slot = SlotOf(from);
  if (slot == nullptr || slot->state != SlotState::kAsked) return;
  last_progress_ = node_->scheduler()->NowMicros();
  if (!m.status.ok()) {
    slot->state = SlotState::kFailed;
  } else {
    slot->clock = std::move(m.clock);
    slot->state = (options_.notfound_ok || !slot->clock.empty())
                      ? SlotState::kAccepted
                      : SlotState::kNotFound;
    if (slot->state == SlotState::kAccepted && merger_ != nullptr) {
      // R clocks were already in: this fold is not needed.
      slot->state = SlotState::kStopped;
    }
  }
  MaybeBegin();
}

void ReadOp::MaybeBegin() {
  if (merger_ != nullptr) return;
  size_t accepted = 0, not_found = 0, failed = 0;
  for (const Slot& s : slots_) {
    accepted += s.state == SlotState::kAccepted;
    not_found += s.state == SlotState::kNotFound;
    failed += s.state == SlotState::kFailed;
  }
  const size_t r = static_cast<size_t>(options_.r);
  if (accepted < r && accepted + not_found + failed == slots_.size()) {
    // Everyone answered: empty replicas make up the quorum after all.
    for (Slot& s : slots_) {
      if (s.state == SlotState::kNotFound && accepted < r) {
        s.state = SlotState::kAccepted;
        ++accepted;
      }
    }
  }
  if (accepted >= r) {
    Begin();
  } else if (slots_.size() - failed < r) {
    Finish(absl::UnavailableError(absl::StrCat(
        "read of set \"", set_, "\": only ", slots_.size() - failed,
        " replicas answered, r = ", options_.r)));
  }
}

void ReadOp::Begin() {
  std::vector<Clock> clocks;
  const size_t r = static_cast<size_t>(options_.r);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.state == SlotState::kAccepted && accepted_.size() < r) {
      s.merger_index = accepted_.size();
      accepted_.push_back(i);
      clocks.push_back(s.clock);
    } else if (s.local != nullptr) {
      s.state = SlotState::kStopped;
      s.local.reset();
    } else if (s.state != SlotState::kFailed) {
      // Not among the first R: stop its fold.
      s.state = SlotState::kStopped;
      SendControl(s, MessageType::kStopFold);
    }
  }
  merger_ = std::make_unique<ReadMerger>(std::move(clocks));
  const uint64_t id = id_;
  Node::Impl* node = node_;
  sink_->OnClock(merger_->MergedClock());
  if (node->FindRead(id) != this) return;
  for (size_t i : accepted_) {
    Slot& s = slots_[i];
    if (s.early_chunk.has_value()) {
      Message chunk = std::move(*s.early_chunk);
      s.early_chunk.reset();
      Feed(s, chunk);
    }
  }
  Pump();
}

void ReadOp::OnChunk(NodeId from, const MessageHeader& header,
                     std::string_view elements) {
  Slot* slot = SlotOf(from);
  if (slot == nullptr || header.seq != slot->next_seq) return;  // Old or dup.
  switch (slot->state) {
    case SlotState::kAsked:  // Its clock was lost; wait for a resend.
    case SlotState::kStopped:
    case SlotState::kFailed:
      return;
    case SlotState::kNotFound:
    case SlotState::kAccepted:
      if (merger_ == nullptr || slot->state == SlotState::kNotFound) {
        // Before R clocks: at most one chunk per replica waits here, since
        // a replica sends the next only after our ack.
        if (slot->early_chunk.has_value()) return;
        Message early = NewMessage(MessageType::kReadChunk, header.request_id,
                                   header.partition);
        early.seq = header.seq;
        early.done = header.done;
        if (!DecodeChunkElements(elements, &early.elements).ok()) return;
        slot->early_chunk = std::move(early);
        return;
      }
      if (!merger_->NeedsMore(slot->merger_index)) return;
      if (!DecodeChunkElements(elements,
                               merger_->RefillBuffer(slot->merger_index))
               .ok()) {
        merger_->RefillBuffer(slot->merger_index)->clear();
        return;  // Malformed: dropped; the retry timer asks again.
      }
      merger_->Refilled(slot->merger_index, header.done);
      Fed(*slot);
      Pump();
      return;
  }
}

void ReadOp::Feed(Slot& slot, Message& chunk) {
  merger_->Push(slot.merger_index, std::move(chunk.elements), chunk.done);
  Fed(slot);
}

void ReadOp::Fed(Slot& slot) {
  last_progress_ = node_->scheduler()->NowMicros();
  ++slot.next_seq;
  slot.requested = false;
}

void ReadOp::SendControl(const Slot& slot, MessageType type) {
  Message m = NewMessage(type, id_, partition_);
  m.seq = slot.next_seq;  // kChunkAck: the chunk wanted.
  node_->Send(slot.node, m);
}

void ReadOp::SendRepairs() {
  if (!options_.read_repair) return;
  for (size_t i : accepted_) {
    std::vector<DeltaOp> ops = merger_->TakeRepairs(slots_[i].merger_index);
    if (!ops.empty()) {
      SendRepair(node_, slots_[i].node, partition_, set_, std::move(ops));
    }
  }
}

void ReadOp::Pump() {
  const uint64_t id = id_;
  Node::Impl* node = node_;
  while (!waiting_for_client_) {
    // The client is done with the last chunk: recycle its storage.
    merger_->Recycle(&out_);
    size_t remaining = limit_ == 0 ? 0 : limit_ - emitted_;
    merger_->Merge(&out_, remaining);
    emitted_ += out_.size();
    SendRepairs();
    const bool limit_reached = limit_ != 0 && emitted_ >= limit_;
    // Ask for the next chunk of every replica whose buffer ran dry (once
    // per chunk: the retry timer asks again if it does not come); read
    // the local replica's next chunk at once.
    bool refilled = false;
    if (!limit_reached) {
      for (size_t i : accepted_) {
        Slot& s = slots_[i];
        if (!merger_->NeedsMore(s.merger_index)) continue;
        if (s.local != nullptr) {
          absl::Status status = FillLocal(s);
          if (!status.ok()) {
            Finish(status);
            return;
          }
          refilled = true;
        } else if (!s.requested) {
          s.requested = true;
          SendControl(s, MessageType::kChunkAck);
        }
      }
    }
    const bool finished = limit_reached || merger_->Finished();
    const bool produced = !out_.empty();
    if (produced) {
      waiting_for_client_ = true;
      // `next` resumes from the scheduler, never inside OnChunk, so this op
      // outlives the call.
      bool go_on = sink_->OnChunk(&out_, [node, id]() {
        node->After(0, [node, id]() {
          ReadOp* op = node->FindRead(id);
          if (op == nullptr || !op->waiting_for_client_) return;
          op->waiting_for_client_ = false;
          op->Pump();
        });
      });
      if (go_on) waiting_for_client_ = false;
    }
    if (finished) {
      // With the client still holding a chunk, finish once it asks again.
      if (!waiting_for_client_) Finish(absl::OkStatus());
      return;
    }
    if (!produced && !refilled) return;  // Waiting for replicas.
  }
}

void ReadOp::ScheduleTimer() {
  const uint64_t id = id_;
  Node::Impl* node = node_;
  node_->After(options_.retry_micros, [node, id]() {
    if (ReadOp* op = node->FindRead(id)) op->OnTimer();
  });
}

void ReadOp::OnTimer() {
  const uint64_t now = node_->scheduler()->NowMicros();
  if (!waiting_for_client_ && now - last_progress_ >= options_.timeout_micros) {
    Finish(absl::DeadlineExceededError(
        absl::StrCat("read of set \"", set_, "\": no progress for ",
                     options_.timeout_micros, " us")));
    return;
  }
  // Retransmit what may have been lost: requests without a clock yet, and
  // acks for chunks that did not come.
  for (Slot& s : slots_) {
    if (s.local != nullptr) continue;
    if (s.state == SlotState::kAsked) {
      SendRead(s);
      ++node_->stats().retransmits;
    } else if (s.state == SlotState::kAccepted && merger_ != nullptr &&
               merger_->NeedsMore(s.merger_index) &&
               now - last_progress_ >= options_.retry_micros) {
      SendControl(s, MessageType::kChunkAck);
      ++node_->stats().retransmits;
    }
  }
  ScheduleTimer();
}

void ReadOp::Finish(absl::Status status) {
  // Release every fold still open (the done ones too: their replicas keep
  // the last chunk for retransmission until told).
  for (Slot& s : slots_) {
    if (s.state == SlotState::kFailed || s.local != nullptr) continue;
    SendControl(s, MessageType::kStopFold);
  }
  std::unique_ptr<ReadSink> sink = std::move(sink_);
  node_->EraseRead(id_);  // Destroys this.
  sink->OnDone(status);
}

// ---- Membership queries.

QueryOp::QueryOp(Node::Impl* node, uint64_t id, std::string set,
                 std::vector<std::string> elements,
                 const ClusterReadOptions& options,
                 std::function<void(absl::StatusOr<Membership>)> done)
    : node_(node),
      id_(id),
      set_(std::move(set)),
      partition_(node->ring().PartitionOf(set_)),
      elements_(std::move(elements)),
      options_(options),
      done_(std::move(done)),
      preference_(node->ring().PreferenceList(partition_)) {}

void QueryOp::Start() {
  deadline_ = node_->scheduler()->NowMicros() + options_.timeout_micros;
  const Message m = QueryMessage();
  for (NodeId n : preference_) node_->Send(n, m);
  ScheduleTimer();
}

Message QueryOp::QueryMessage() const {
  Message m = NewMessage(MessageType::kQuery, id_, partition_);
  m.set = set_;
  m.query = elements_;
  return m;
}

void QueryOp::OnReply(NodeId from, Message& m) {
  if (replies_.count(from) || failed_.count(from)) return;
  if (std::find(preference_.begin(), preference_.end(), from) ==
      preference_.end()) {
    return;
  }
  if (!m.status.ok() || m.elements.size() != elements_.size()) {
    failed_.insert(from);
  } else if (options_.notfound_ok || !m.clock.empty()) {
    replies_[from] = std::move(m);
  } else {
    failed_.insert(from);  // Not found does not count; see below.
  }
  const size_t r = static_cast<size_t>(options_.r);
  if (replies_.size() < r) {
    if (preference_.size() - failed_.size() < r) {
      Finish(absl::UnavailableError(absl::StrCat(
          "query of set \"", set_, "\": too few replicas answered")));
    }
    return;
  }
  // Merge the R replies: each is one sorted, complete "chunk".
  std::vector<std::string> sorted = elements_;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<Clock> clocks;
  std::vector<NodeId> nodes;
  std::vector<std::vector<ElementDots>> chunks;
  for (auto& [node, reply] : replies_) {
    if (clocks.size() == r) break;
    nodes.push_back(node);
    clocks.push_back(std::move(reply.clock));
    std::vector<ElementDots> present;
    for (ElementDots& e : reply.elements) {
      if (!e.dots.empty()) present.push_back(std::move(e));
    }
    std::sort(present.begin(), present.end(),
              [](const ElementDots& a, const ElementDots& b) {
                return a.element < b.element;
              });
    present.erase(std::unique(present.begin(), present.end(),
                              [](const ElementDots& a, const ElementDots& b) {
                                return a.element == b.element;
                              }),
                  present.end());
    chunks.push_back(std::move(present));
  }
  ReadMerger merger(std::move(clocks));
  for (size_t i = 0; i < chunks.size(); ++i) {
    merger.Push(i, std::move(chunks[i]), /*done=*/true);
  }
  std::vector<ElementDots> merged;
  merger.Merge(&merged);
  if (options_.read_repair) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::vector<DeltaOp> ops = merger.TakeRepairs(i);
      if (!ops.empty()) {
        SendRepair(node_, nodes[i], partition_, set_, std::move(ops));
      }
    }
  }
  Membership result;
  result.all_present = true;
  for (const std::string& e : elements_) {
    auto it = std::lower_bound(merged.begin(), merged.end(), e,
                               [](const ElementDots& a, const std::string& b) {
                                 return a.element < b;
                               });
    ElementDots& out = result.elements.emplace_back();
    out.element = e;
    if (it != merged.end() && it->element == e) out.dots = it->dots;
    if (out.dots.empty()) result.all_present = false;
  }
  Finish(std::move(result));
}

void QueryOp::ScheduleTimer() {
  const uint64_t id = id_;
  Node::Impl* node = node_;
  node_->After(options_.retry_micros, [node, id]() {
    if (QueryOp* op = node->FindQuery(id)) op->OnTimer();
  });
}

void QueryOp::OnTimer() {
  if (node_->scheduler()->NowMicros() >= deadline_) {
    Finish(absl::DeadlineExceededError(
        absl::StrCat("query of set \"", set_, "\": timed out")));
    return;
  }
  const Message m = QueryMessage();
  for (NodeId n : preference_) {
    if (!replies_.count(n) && !failed_.count(n)) {
      node_->Send(n, m);
      ++node_->stats().retransmits;
    }
  }
  ScheduleTimer();
}

void QueryOp::Finish(absl::StatusOr<Membership> result) {
  auto done = std::move(done_);
  node_->EraseQuery(id_);  // Destroys this.
  done(std::move(result));
}

// ---- Node's read-side client API, as sinks over ReadOp.

namespace {

class HandlerSink final : public ReadSink {
 public:
  explicit HandlerSink(ReadHandler* handler) : handler_(handler) {}
  void OnClock(const Clock& clock) override { handler_->OnClock(clock); }
  bool OnChunk(std::vector<ElementDots>* elements,
               std::function<void()> next) override {
    handler_->OnChunk(elements, std::move(next));
    return false;
  }
  void OnDone(absl::Status status) override { handler_->OnDone(status); }

 private:
  ReadHandler* handler_;
};

class RangeSink final : public ReadSink {
 public:
  RangeSink(size_t limit, std::function<void(absl::StatusOr<RangeResult>)> done)
      : limit_(limit), done_(std::move(done)) {}
  void OnClock(const Clock&) override {}
  bool OnChunk(std::vector<ElementDots>* elements,
               std::function<void()>) override {
    for (ElementDots& e : *elements) result_.elements.push_back(std::move(e));
    return true;
  }
  void OnDone(absl::Status status) override {
    if (!status.ok()) {
      done_(status);
      return;
    }
    if (limit_ != 0 && result_.elements.size() >= limit_) {
      result_.continuation.push_back(kContinuationVersion);
      result_.continuation.append(result_.elements.back().element);
    }
    done_(std::move(result_));
  }

 private:
  const size_t limit_;
  std::function<void(absl::StatusOr<RangeResult>)> done_;
  RangeResult result_;
};

class CountSink final : public ReadSink {
 public:
  explicit CountSink(std::function<void(absl::StatusOr<uint64_t>)> done)
      : done_(std::move(done)) {}
  void OnClock(const Clock&) override {}
  bool OnChunk(std::vector<ElementDots>* elements,
               std::function<void()>) override {
    count_ += elements->size();
    return true;
  }
  void OnDone(absl::Status status) override {
    if (!status.ok()) {
      done_(status);
    } else {
      done_(count_);
    }
  }

 private:
  std::function<void(absl::StatusOr<uint64_t>)> done_;
  uint64_t count_ = 0;
};

}  // namespace

void Node::Read(std::string_view set, const ClusterReadOptions& options,
                ReadHandler* handler, const RangeQuery* bounds) {
  std::optional<std::string> start, end;
  bool start_inclusive = true, end_inclusive = false;
  if (bounds != nullptr) {
    start = bounds->start;
    end = bounds->end;
    start_inclusive = bounds->start_inclusive;
    end_inclusive = bounds->end_inclusive;
  }
  impl_->StartRead(set, options, std::move(start), start_inclusive,
                   std::move(end), end_inclusive, 0,
                   std::make_unique<HandlerSink>(handler));
}

void Node::Range(std::string_view set, const RangeQuery& query,
                 const ClusterReadOptions& options,
                 std::function<void(absl::StatusOr<RangeResult>)> done) {
  std::optional<std::string> start = query.start;
  bool start_inclusive = query.start_inclusive;
  if (!query.continuation.empty()) {
    if (query.continuation[0] != kContinuationVersion) {
      done(absl::InvalidArgumentError("unrecognised continuation token"));
      return;
    }
    start = query.continuation.substr(1);
    start_inclusive = false;
  }
  impl_->StartRead(set, options, std::move(start), start_inclusive, query.end,
                   query.end_inclusive, query.limit,
                   std::make_unique<RangeSink>(query.limit, std::move(done)));
}

void Node::Count(std::string_view set, const ClusterReadOptions& options,
                 std::function<void(absl::StatusOr<uint64_t>)> done) {
  impl_->StartRead(set, options, std::nullopt, true, std::nullopt, false, 0,
                   std::make_unique<CountSink>(std::move(done)));
}

}  // namespace bigset
