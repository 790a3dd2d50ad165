#include "bigset/node.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "node_impl.h"

namespace bigset {

namespace {
absl::Status NotAReplica(NodeId node, uint32_t partition) {
  return absl::UnavailableError(absl::StrCat(
      "node ", node, " holds no replica of partition ", partition));
}
}  // namespace

namespace {
// A reply of `type` to `request` (same request id and partition).
Message ReplyTo(const Message& request, MessageType type) {
  return NewMessage(type, request.request_id, request.partition);
}
}  // namespace

ReadHandler::~ReadHandler() = default;
Transport::~Transport() = default;
Scheduler::~Scheduler() = default;

Node::Impl::Impl(NodeId id, Ring ring, Store* store, Transport* transport,
                 Scheduler* scheduler, const NodeOptions& options)
    : id_(id),
      ring_(std::move(ring)),
      store_(store),
      transport_(transport),
      scheduler_(scheduler),
      options_(options),
      alive_(std::make_shared<Impl*>(this)),
      // Request ids must not repeat across restarts (replicas cache replies
      // by (node, request id)): start from the clock.
      next_request_id_((scheduler->NowMicros() << 16) + 1),
      replicas_(ring_.ring_size()) {}

Node::Impl::~Impl() {
  // Coordinators and folds go first (folds hold snapshots of the replicas'
  // store), then the replicas.
  alive_.reset();
  writes_.clear();
  reads_.clear();
  queries_.clear();
  folds_.clear();
  replicas_.clear();
}

void Node::Impl::Send(NodeId to, const Message& m) {
  transport_->Send(id_, to, m.Encode());
}

void Node::Impl::SendBytes(NodeId to, std::string bytes) {
  transport_->Send(id_, to, std::move(bytes));
}

void Node::Impl::EnsureWriteTick() {
  if (write_tick_scheduled_ || writes_.empty()) return;
  write_tick_scheduled_ = true;
  After(write_tick_micros_, [this]() { WriteTick(); });
}

void Node::Impl::WriteTick() {
  write_tick_scheduled_ = false;
  const uint64_t now = scheduler_->NowMicros();
  std::vector<uint64_t> ids;
  ids.reserve(writes_.size());
  for (const auto& [id, op] : writes_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (uint64_t id : ids) {
    if (WriteOp* op = FindWrite(id)) op->OnTick(now);
  }
  EnsureWriteTick();
}

Replica* Node::Impl::LocalReplica(uint32_t partition) {
  if (partition >= ring_.ring_size()) return nullptr;
  if (replicas_[partition] != nullptr) return replicas_[partition].get();
  const auto& pl = ring_.PreferenceList(partition);
  if (std::find(pl.begin(), pl.end(), id_) == pl.end()) return nullptr;
  ReplicaOptions ro;
  ro.keyspace = partition;
  ro.lock_stripes = 4;
  ro.sync_writes = options_.sync_writes;
  ro.actor_id_source = options_.actor_id_source;
  size_t mine = std::max<size_t>(1, ring_.PartitionsOf(id_).size());
  ro.clock_cache_bytes =
      std::max<size_t>(4096, options_.clock_cache_bytes / mine);
  absl::StatusOr<std::unique_ptr<Replica>> r = Replica::Open(store_, ro);
  if (!r.ok()) return nullptr;
  return (replicas_[partition] = std::move(*r)).get();
}

void Node::Impl::EraseWrite(uint64_t id) {
  auto it = writes_.find(id);
  if (it == writes_.end()) return;
  std::unique_ptr<WriteOp> op = std::move(it->second);
  writes_.erase(it);
  // A few idle coordinators cover a steady stream of writes.
  constexpr size_t kMaxSpareWrites = 16;
  if (spare_writes_.size() < kMaxSpareWrites) {
    op->Release();
    spare_writes_.push_back(std::move(op));
  }
}

WriteOp* Node::Impl::FindWrite(uint64_t id) {
  auto it = writes_.find(id);
  return it == writes_.end() ? nullptr : it->second.get();
}

ReadOp* Node::Impl::FindRead(uint64_t id) {
  auto it = reads_.find(id);
  return it == reads_.end() ? nullptr : it->second.get();
}

QueryOp* Node::Impl::FindQuery(uint64_t id) {
  auto it = queries_.find(id);
  return it == queries_.end() ? nullptr : it->second.get();
}

void Node::Impl::Receive(NodeId from, std::string_view bytes) {
  ++stats_.messages_received;
  if (bytes.size() > 1 &&
      bytes[1] == static_cast<char>(MessageType::kReadChunk)) {
    // The bulk of a read: decoded by the coordinator into its buffers.
    MessageHeader header;
    std::string_view elements;
    if (!ParseReadChunk(bytes, &header, &elements).ok()) {
      ++stats_.malformed_messages;
      return;
    }
    if (ReadOp* op = FindRead(header.request_id)) {
      op->OnChunk(from, header, elements);
    }
    return;
  }
  if (bytes.size() > 1 &&
      bytes[1] == static_cast<char>(MessageType::kReplicate)) {
    // Every replicated write: decoded into a reused Delta, acked with a
    // few bytes.
    MessageHeader header;
    std::string_view delta;
    if (!ParseDeltaMessage(bytes, &header, &delta).ok() ||
        !Delta::DecodeInto(delta, &scratch_delta_).ok()) {
      ++stats_.malformed_messages;
      return;
    }
    Replica* replica = LocalReplica(header.partition);
    absl::Status applied = replica == nullptr
                               ? NotAReplica(id_, header.partition)
                               : replica->Apply(scratch_delta_);
    std::string ack;
    EncodeStatusReply(MessageType::kReplicateAck, header.request_id,
                      header.partition, applied, &ack);
    transport_->Send(id_, from, std::move(ack));
    return;
  }
  if (bytes.size() > 1 &&
      bytes[1] == static_cast<char>(MessageType::kReplicateAck)) {
    MessageHeader header;
    absl::Status status;
    if (!ParseStatusReply(bytes, &header, &status).ok()) {
      ++stats_.malformed_messages;
      return;
    }
    if (WriteOp* op = FindWrite(header.request_id)) {
      op->OnReplicateAck(from, status);
    }
    return;
  }
  absl::StatusOr<Message> decoded = Message::Decode(bytes);
  if (!decoded.ok()) {
    ++stats_.malformed_messages;
    return;
  }
  Message& m = *decoded;
  switch (m.type) {
    case MessageType::kUpdate:
      HandleUpdate(from, m);
      break;
    case MessageType::kReplicate:
      break;  // Handled above.
    case MessageType::kRead:
      HandleRead(from, m);
      break;
    case MessageType::kChunkAck:
      HandleChunkAck(from, m);
      break;
    case MessageType::kStopFold:
      folds_.erase({from, m.request_id});
      break;
    case MessageType::kQuery:
      HandleQuery(from, m);
      break;
    case MessageType::kRepair:
      HandleRepair(m);
      break;
    case MessageType::kUpdateReply:
      if (WriteOp* op = FindWrite(m.request_id)) op->OnUpdateReply(from, m);
      break;
    case MessageType::kReplicateAck:
      break;  // Handled above.
    case MessageType::kReadClock:
      if (ReadOp* op = FindRead(m.request_id)) op->OnClock(from, m);
      break;
    case MessageType::kReadChunk:
      break;  // Handled above.
    case MessageType::kQueryReply:
      if (QueryOp* op = FindQuery(m.request_id)) op->OnReply(from, m);
      break;
  }
}

// ---- Replica side.

void Node::Impl::HandleUpdate(NodeId from, Message& m) {
  const FoldKey key{from, m.request_id};
  auto cached = update_replies_.find(key);
  if (cached != update_replies_.end()) {
    ++stats_.duplicate_updates;
    transport_->Send(id_, from, update_reply_ring_[cached->second].bytes);
    return;
  }
  Message reply = ReplyTo(m, MessageType::kUpdateReply);
  Replica* replica = LocalReplica(m.partition);
  if (replica == nullptr) {
    reply.status = NotAReplica(id_, m.partition);
  } else {
    absl::StatusOr<Delta> delta = replica->Update(m.set, m.ops);
    if (delta.ok()) {
      reply.delta = std::move(*delta);
    } else {
      reply.status = delta.status();
    }
  }
  std::string bytes = reply.Encode();
  if (reply.status.ok()) {
    constexpr size_t kMaxCachedReplies = 4096;
    if (update_reply_ring_.size() < kMaxCachedReplies) {
      update_reply_ring_.push_back({key, bytes});
      update_replies_[key] = update_reply_ring_.size() - 1;
    } else {
      CachedReply& slot = update_reply_ring_[update_reply_next_];
      update_replies_.erase(slot.key);
      slot.key = key;
      slot.bytes.assign(bytes);  // Reuses the slot's capacity.
      update_replies_[key] = update_reply_next_;
      update_reply_next_ = (update_reply_next_ + 1) % kMaxCachedReplies;
    }
  }
  transport_->Send(id_, from, std::move(bytes));
}

void Node::Impl::HandleRepair(Message& m) {
  Replica* replica = LocalReplica(m.partition);
  if (replica != nullptr && replica->Apply(m.delta).ok()) {
    ++stats_.repairs_applied;
  }
}

void Node::Impl::HandleQuery(NodeId from, Message& m) {
  Message reply = ReplyTo(m, MessageType::kQueryReply);
  Replica* replica = LocalReplica(m.partition);
  if (replica == nullptr) {
    reply.status = NotAReplica(id_, m.partition);
  } else {
    absl::StatusOr<Membership> result =
        replica->ContainsAll(m.set, m.query, &reply.clock);
    if (result.ok()) {
      reply.elements = std::move(result->elements);
    } else {
      reply.status = result.status();
    }
  }
  Send(from, reply);
}

void Node::Impl::HandleRead(NodeId from, Message& m) {
  const FoldKey key{from, m.request_id};
  auto existing = folds_.find(key);
  if (existing != folds_.end()) {
    // A retransmitted request: the clock or first chunk was lost.
    Fold& fold = existing->second;
    fold.last_activity = scheduler_->NowMicros();
    transport_->Send(id_, from, fold.clock_message);
    SendChunk(key, fold);
    return;
  }
  Message clock = ReplyTo(m, MessageType::kReadClock);
  Replica* replica = LocalReplica(m.partition);
  if (replica == nullptr) {
    clock.status = NotAReplica(id_, m.partition);
    Send(from, clock);
    return;
  }
  SetReadOptions ro;
  ro.batch_size = m.batch_size;
  ro.start = std::move(m.start);
  ro.end = std::move(m.end);
  ro.start_inclusive = m.start_inclusive;
  ro.end_inclusive = m.end_inclusive;
  absl::StatusOr<std::unique_ptr<SetReader>> reader = replica->Read(m.set, ro);
  if (!reader.ok()) {
    clock.status = reader.status();
    Send(from, clock);
    return;
  }
  clock.clock = (*reader)->clock();
  Fold& fold = folds_[key];
  fold.partition = m.partition;
  fold.reader = std::move(*reader);
  fold.clock_message = clock.Encode();
  fold.last_activity = scheduler_->NowMicros();
  transport_->Send(id_, from, fold.clock_message);
  // The first chunk goes with the clock; each later one waits for its ack.
  SendNextChunk(key, fold, 0);
  ScheduleFoldExpiry(key);
}

void Node::Impl::SendNextChunk(const FoldKey& key, Fold& fold, uint64_t seq) {
  absl::StatusOr<bool> more = fold.reader->Next(&fold.buffer);
  if (!more.ok()) {
    // Corruption mid-fold: end it; the coordinator sees the replica go
    // silent and reads from the others.
    folds_.erase(key);
    return;
  }
  fold.done = !*more || fold.reader->AtEnd();
  fold.last_sent = seq;
  SendChunk(key, fold);
}

void Node::Impl::SendChunk(const FoldKey& key, const Fold& fold) {
  // Encoded from the fold's buffer, which holds the last chunk until the
  // next one is produced: a retransmission encodes it again.
  std::string bytes;
  EncodeReadChunk(key.second, fold.partition, fold.last_sent, fold.done,
                  fold.buffer, &bytes);
  transport_->Send(id_, key.first, std::move(bytes));
}

void Node::Impl::HandleChunkAck(NodeId from, const Message& m) {
  const FoldKey key{from, m.request_id};
  auto it = folds_.find(key);
  if (it == folds_.end()) return;
  Fold& fold = it->second;
  fold.last_activity = scheduler_->NowMicros();
  if (m.seq == fold.last_sent + 1 && !fold.done) {
    SendNextChunk(key, fold, m.seq);
  } else if (m.seq == fold.last_sent) {
    SendChunk(key, fold);  // Retransmit.
    ++stats_.retransmits;
  }
}

void Node::Impl::ScheduleFoldExpiry(const FoldKey& key) {
  const uint64_t timeout = options_.fold_idle_timeout_micros;
  After(timeout, [this, key, timeout]() {
    auto it = folds_.find(key);
    if (it == folds_.end()) return;
    if (scheduler_->NowMicros() - it->second.last_activity >= timeout) {
      folds_.erase(it);
    } else {
      ScheduleFoldExpiry(key);
    }
  });
}

// ---- Client entry points.

void Node::Impl::Update(std::string_view set, std::vector<UpdateOp> ops,
                        const ClusterWriteOptions& options,
                        std::function<void(absl::StatusOr<Delta>)> done) {
  if (options.w < 1 || options.w > ring_.n()) {
    done(absl::InvalidArgumentError("w must be in [1, n]"));
    return;
  }
  uint64_t id = NextRequestId();
  std::unique_ptr<WriteOp> op;
  if (spare_writes_.empty()) {
    op = std::make_unique<WriteOp>(this);
  } else {
    op = std::move(spare_writes_.back());
    spare_writes_.pop_back();
  }
  op->Reset(id, set, std::move(ops), options, std::move(done));
  WriteOp* raw = op.get();
  writes_[id] = std::move(op);
  write_tick_micros_ = write_tick_micros_ == 0
                           ? options.retry_micros
                           : std::min(write_tick_micros_, options.retry_micros);
  raw->Start();
  EnsureWriteTick();
}

void Node::Impl::StartRead(std::string_view set,
                           const ClusterReadOptions& options,
                           std::optional<std::string> start,
                           bool start_inclusive, std::optional<std::string> end,
                           bool end_inclusive, size_t limit,
                           std::unique_ptr<ReadSink> sink) {
  if (options.r < 1 || options.r > ring_.n() || options.batch_size == 0) {
    sink->OnDone(
        absl::InvalidArgumentError("r must be in [1, n] and batch_size >= 1"));
    return;
  }
  uint64_t id = NextRequestId();
  auto op = std::make_unique<ReadOp>(
      this, id, std::string(set), options, std::move(start), start_inclusive,
      std::move(end), end_inclusive, limit, std::move(sink));
  ReadOp* raw = op.get();
  reads_[id] = std::move(op);
  raw->Start();
}

void Node::Impl::ContainsAll(
    std::string_view set, std::vector<std::string> elements,
    const ClusterReadOptions& options,
    std::function<void(absl::StatusOr<Membership>)> done) {
  if (options.r < 1 || options.r > ring_.n()) {
    done(absl::InvalidArgumentError("r must be in [1, n]"));
    return;
  }
  uint64_t id = NextRequestId();
  auto op =
      std::make_unique<QueryOp>(this, id, std::string(set), std::move(elements),
                                options, std::move(done));
  QueryOp* raw = op.get();
  queries_[id] = std::move(op);
  raw->Start();
}

// ---- Node (the public face).

absl::StatusOr<std::unique_ptr<Node>> Node::Open(NodeId id, const Ring& ring,
                                                 Store* store,
                                                 Transport* transport,
                                                 Scheduler* scheduler,
                                                 const NodeOptions& options) {
  const auto& nodes = ring.nodes();
  if (std::find(nodes.begin(), nodes.end(), id) == nodes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", id, " is not in the ring"));
  }
  if (store == nullptr || transport == nullptr || scheduler == nullptr) {
    return absl::InvalidArgumentError("store, transport and scheduler needed");
  }
  auto impl =
      std::make_unique<Impl>(id, ring, store, transport, scheduler, options);
  // Open every hosted replica now, so a corrupt store fails here.
  for (uint32_t p : ring.PartitionsOf(id)) {
    if (impl->LocalReplica(p) == nullptr) {
      return absl::DataLossError(
          absl::StrCat("node ", id, ": cannot open replica of partition ", p));
    }
  }
  return std::unique_ptr<Node>(new Node(std::move(impl)));
}

Node::Node(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Node::~Node() = default;

NodeId Node::id() const { return impl_->id(); }

void Node::Receive(NodeId from, std::string_view bytes) {
  impl_->Receive(from, bytes);
}

void Node::Update(std::string_view set, std::vector<UpdateOp> ops,
                  const ClusterWriteOptions& options,
                  std::function<void(absl::StatusOr<Delta>)> done) {
  impl_->Update(set, std::move(ops), options, std::move(done));
}

void Node::ContainsAll(std::string_view set, std::vector<std::string> elements,
                       const ClusterReadOptions& options,
                       std::function<void(absl::StatusOr<Membership>)> done) {
  impl_->ContainsAll(set, std::move(elements), options, std::move(done));
}

Replica* Node::LocalReplica(uint32_t partition) {
  return impl_->LocalReplica(partition);
}

Node::Stats Node::stats() const {
  return const_cast<Impl*>(impl_.get())->stats();
}

}  // namespace bigset
