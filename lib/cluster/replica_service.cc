#include "cluster/replica_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cluster/place_quorum.h"
#include "core/string_view_compat.h"

namespace bigset {
namespace {

absl::Status NotAReplica(NodeId node, uint32_t partition) {
  return absl::UnavailableError(absl::StrCat(
      "node ", node, " holds no replica of partition ", partition));
}

// A request about a set that the ring does not put in the partition it
// names: applying it would put the set in a replica that never serves it.
absl::Status WrongPartition(std::string_view set, uint32_t partition) {
  return absl::InvalidArgumentError(
      absl::StrCat("set \"", absl::CHexEscape(ToAbsl(set)),
                   "\" does not belong to partition ", partition));
}

}  // namespace

absl::Status ReplicaService::NoReadableReplica(uint32_t partition) const {
  const NodeId self = self_;
  if (roles_->Serves(partition)) {
    // Handing over, or committed to: its writes go (or may have gone) on
    // to the node that took its place, so its replica alone is not the
    // place's; nor is that node's, until the forwards drain
    // (docs/DESIGN.md, "Quorums count places").
    return absl::UnavailableError(
        absl::StrCat("node ", self, " hands partition ", partition, " over"));
  }
  // Not serving (any more): what it held is with whoever took its place.
  return absl::NotFoundError(
      absl::StrCat("node ", self, " does not serve partition ", partition));
}

ReplicaService::ReplicaService(NodeId self, const PartitionRoles* roles,
                               NodeCounters* stats,
                               const ReplicaServiceOptions& options)
    : self_(self), roles_(roles), stats_(stats), options_(options) {}

ReplicaService::~ReplicaService() = default;

void ReplicaService::Clear() { folds_.clear(); }

template <typename Body>
void ReplicaService::Reply(ServiceOutput& out, NodeId to,
                           const MessageHeader& request, const Body& body) {
  out.sends.emplace_back(
      to, EncodeMessage(request.request_id, request.partition, body));
}

ServiceOutput ReplicaService::HandleDelta(NodeId from,
                                          const MessageHeader& header,
                                          std::string_view body) {
  ServiceOutput out(header.partition);
  std::string_view delta;
  if (!ParseDeltaBody(body, &delta).ok() ||
      !Delta::DecodeInto(delta, &scratch_delta_).ok()) {
    ++stats_->malformed_messages;
    return out;
  }
  // A forward of a hand-off reaches the receiver's replica before it
  // serves the partition; everything else needs a replica that serves it.
  Replica* replica = header.type == MessageType::kHandoffDelta
                         ? roles_->LocalReplica(header.partition)
                         : roles_->ServingReplica(header.partition);
  if (replica == nullptr) {
    // Handed over: the delta goes on to the partition's new owner, which
    // answers through this node. A given-up request this node did
    // coordinate is answered with its own delta (which reached the new
    // owner as a forward), but only once the new owner applied the chosen
    // one: the answer counts this node's place.
    if (header.type == MessageType::kReplicateGivenUp) {
      out.own = GivenUpOwnDelta(from, header);
    }
    out.unplaced = &scratch_delta_;
    return out;
  }
  absl::Status applied;
  if (roles_->ring().PartitionOf(scratch_delta_.set) != header.partition) {
    applied = WrongPartition(scratch_delta_.set, header.partition);
  } else {
    // Acknowledged deltas (not repairs, not a given-up write's) are
    // synced together, once per turn, before their acknowledgements go.
    const bool group =
        replica->sync_writes() && (header.type == MessageType::kReplicate ||
                                   header.type == MessageType::kHandoffDelta);
    applied = group ? replica->ApplyUnsynced(scratch_delta_)
                    : replica->Apply(scratch_delta_);
    if (applied.ok()) out.applied = &scratch_delta_;
    if (group && applied.ok()) {
      AckWhenDurable(from,
                     MessageHeader{header.type == MessageType::kHandoffDelta
                                       ? MessageType::kHandoffDeltaAck
                                       : MessageType::kReplicateAck,
                                   header.request_id, header.partition},
                     replica, out);
      return out;
    }
  }
  if (absl::IsInvalidArgument(applied)) ++stats_->deltas_rejected;
  if (header.type == MessageType::kRepair) {
    // Repairs are not acknowledged: the next read finds what is missing.
    if (applied.ok()) ++stats_->repairs_applied;
    return out;
  }
  if (header.type == MessageType::kReplicateGivenUp && applied.ok()) {
    if (std::optional<Delta> own = GivenUpOwnDelta(from, header)) {
      // Applied here: its own delta answers for this replica.
      Reply(out, from, header, msg::ReplicateAckWithDelta{*std::move(own)});
      return out;
    }
  }
  std::string ack;
  EncodeStatusReply(MessageHeader{header.type == MessageType::kHandoffDelta
                                      ? MessageType::kHandoffDeltaAck
                                      : MessageType::kReplicateAck,
                                  header.request_id, header.partition},
                    applied, self_, roles_->PlaceOf(header.partition), &ack);
  out.sends.emplace_back(from, std::move(ack));
  return out;
}

ServiceOutput ReplicaService::RefuseDelta(NodeId from,
                                          const MessageHeader& header) {
  ServiceOutput out(header.partition);
  out.tell_moved = true;
  // Repairs are not acknowledged.
  if (header.type == MessageType::kRepair) return out;
  std::string ack;
  EncodeStatusReply(MessageHeader{header.type == MessageType::kHandoffDelta
                                      ? MessageType::kHandoffDeltaAck
                                      : MessageType::kReplicateAck,
                                  header.request_id, header.partition},
                    NotAReplica(self_, header.partition), self_,
                    msg::PlaceTaken(), &ack);
  out.sends.emplace_back(from, std::move(ack));
  return out;
}

void ReplicaService::AckWhenDurable(NodeId to, const MessageHeader& ack,
                                    Replica* replica, ServiceOutput& out) {
  pending_acks_.push_back(PendingAck{to, ack});
  sync_replica_ = replica;
  sync_partition_ = ack.partition;
  if (flush_scheduled_) return;
  flush_scheduled_ = true;
  // After this turn: every delta that arrived with this one shares the
  // sync.
  out.flush_acks = true;
}

ServiceOutput ReplicaService::FlushAcks() {
  ServiceOutput out;
  flush_scheduled_ = false;
  // The replica may have been let go meanwhile: sync through the one that
  // serves the partition now, if any (a let-go replica's writes were
  // synced when it was let go).
  Replica* replica = roles_->LocalReplica(sync_partition_) == sync_replica_
                         ? sync_replica_
                         : roles_->LocalReplica(sync_partition_);
  const absl::Status synced =
      replica != nullptr
          ? replica->Sync()
          : absl::UnavailableError("replica let go before its sync");
  ++stats_->group_commits;
  std::vector<PendingAck> acks;
  acks.swap(pending_acks_);
  for (const PendingAck& a : acks) {
    std::string bytes;
    EncodeStatusReply(a.header, synced, self_,
                      roles_->PlaceOf(a.header.partition), &bytes);
    out.sends.emplace_back(a.to, std::move(bytes));
  }
  return out;
}

std::optional<Delta> ReplicaService::GivenUpOwnDelta(
    NodeId from, const MessageHeader& header) {
  // The write asked this replica to coordinate, then gave up on it and had
  // another do it. If this one did coordinate it too, its delta holds a dot
  // no other replica knows: the write is to replicate it. Otherwise fence
  // the request, so a delayed copy of it is never coordinated here later.
  const FoldKey key{from, header.request_id};
  // Fenced either way: once the cached reply is evicted, a delayed copy of
  // the request must not be coordinated again.
  Fence(key);
  auto cached = reply_index_.find(key);
  if (cached == reply_index_.end()) return std::nullopt;
  absl::StatusOr<Message> reply =
      DecodeMessage(replies_[cached->second - first_reply_seq_].bytes);
  if (!reply.ok()) return std::nullopt;
  msg::UpdateReply* update = reply->As<msg::UpdateReply>();
  if (update == nullptr || !update->status.ok()) return std::nullopt;
  return std::move(update->delta);
}

ServiceOutput ReplicaService::HandleUpdate(NodeId from,
                                           const MessageHeader& header,
                                           msg::Update& m) {
  return CoordinateWrite(from, header, m.set, [&m](Replica* replica) {
    return replica->Update(m.set, m.ops);
  });
}

ServiceOutput ReplicaService::HandleClear(NodeId from,
                                          const MessageHeader& header,
                                          msg::Clear& m) {
  return CoordinateWrite(from, header, m.set, [&m](Replica* replica) {
    return replica->Clear(m.set, m.clock);
  });
}

ServiceOutput ReplicaService::CoordinateWrite(
    NodeId from, const MessageHeader& header, std::string_view set,
    absl::FunctionRef<absl::StatusOr<Delta>(Replica*)> write) {
  ServiceOutput out(header.partition);
  const FoldKey key{from, header.request_id};
  auto cached = reply_index_.find(key);
  if (cached != reply_index_.end()) {
    ++stats_->duplicate_updates;
    out.sends.emplace_back(from,
                           replies_[cached->second - first_reply_seq_].bytes);
    return out;
  }
  msg::UpdateReply reply;
  if (fenced_.contains(key)) {
    // Another replica coordinated this write (a ReplicateGivenUp came
    // first): coordinating it here too would make a dot nobody replicates.
    ++stats_->updates_fenced;
    reply.status = absl::FailedPreconditionError(
        "the write was coordinated by another replica");
    Reply(out, from, header, reply);
    return out;
  }
  Replica* replica = roles_->ServingReplica(header.partition);
  if (replica == nullptr) {
    reply.status = NotAReplica(self_, header.partition);
    out.tell_moved = true;
  } else if (roles_->ring().PartitionOf(set) != header.partition) {
    reply.status = WrongPartition(set, header.partition);
  } else {
    absl::StatusOr<Delta> delta = write(replica);
    if (delta.ok()) {
      reply.delta = std::move(*delta);
    } else {
      reply.status = delta.status();
    }
  }
  std::string bytes = EncodeMessage(header.request_id, header.partition, reply);
  // Only applied updates are cached: a failed one applied nothing, so a
  // retransmission may as well try again.
  if (reply.status.ok()) {
    CacheReply(key, bytes);
    written_ = std::move(reply.delta);
    out.applied = &written_;
  }
  out.sends.emplace_back(from, std::move(bytes));
  return out;
}

void ReplicaService::CacheReply(const FoldKey& key, const std::string& bytes) {
  constexpr size_t kEntryOverhead = 64;
  replies_.push_back(CachedReply{key, bytes});
  reply_index_[key] = first_reply_seq_ + replies_.size() - 1;
  reply_bytes_ += bytes.size() + kEntryOverhead;
  // Keep the newest reply even if it alone exceeds the budget.
  while (reply_bytes_ > options_.reply_cache_bytes && replies_.size() > 1) {
    const CachedReply& old = replies_.front();
    reply_bytes_ -= old.bytes.size() + kEntryOverhead;
    reply_index_.erase(old.key);
    replies_.pop_front();
    ++first_reply_seq_;
  }
}

void ReplicaService::Fence(const FoldKey& key) {
  // Only writes that switched coordinator fence, so a few thousand entries
  // cover far more than a write's lifetime.
  constexpr size_t kMaxFenced = 1 << 14;
  if (!fenced_.insert(key).second) return;
  fence_order_.push_back(key);
  if (fence_order_.size() > kMaxFenced) {
    fenced_.erase(fence_order_.front());
    fence_order_.pop_front();
  }
}

template <typename ReplyBody, typename Fill>
ServiceOutput ReplicaService::AnswerFromReadable(NodeId from,
                                                 const MessageHeader& header,
                                                 Fill fill) {
  ServiceOutput out(header.partition);
  ReplyBody reply;
  Replica* replica = roles_->ReadableReplica(header.partition);
  if (replica == nullptr) {
    reply.status = NoReadableReplica(header.partition);
    out.tell_moved = true;
  } else {
    fill(*replica, reply);
  }
  Reply(out, from, header, reply);
  return out;
}

ServiceOutput ReplicaService::HandleQuery(NodeId from,
                                          const MessageHeader& header,
                                          msg::Query& m) {
  return AnswerFromReadable<msg::QueryReply>(
      from, header, [&m](Replica& replica, msg::QueryReply& reply) {
        absl::StatusOr<Membership> result =
            replica.ContainsAll(m.set, m.elements, &reply.clock);
        if (result.ok()) {
          reply.elements = std::move(result->elements);
        } else {
          reply.status = ReadErrorForReply(result.status());
        }
      });
}

ServiceOutput ReplicaService::HandleCount(NodeId from,
                                          const MessageHeader& header,
                                          msg::Count& m) {
  return AnswerFromReadable<msg::CountReply>(
      from, header, [&m](Replica& replica, msg::CountReply& reply) {
        absl::StatusOr<SetCount> count = replica.CountSummary(m.set);
        if (count.ok()) {
          reply.found = count->found;
          reply.count = count->count;
          reply.set_digest = count->digest;
          reply.tombstone_digest = count->tombstone_digest;
        } else {
          reply.status = ReadErrorForReply(count.status());
        }
      });
}

ServiceOutput ReplicaService::HandleRead(NodeId from,
                                         const MessageHeader& header,
                                         msg::Read& m, uint64_t now) {
  ServiceOutput out(header.partition);
  const FoldKey key{from, header.request_id};
  auto existing = folds_.find(key);
  if (existing != folds_.end()) {
    // A retransmitted request: the clock or first chunk was lost.
    Fold& fold = existing->second;
    fold.last_activity = now;
    out.sends.emplace_back(from, fold.clock_message);
    SendChunk(key, fold, out);
    return out;
  }
  msg::ReadClock clock;
  Replica* replica = roles_->ReadableReplica(header.partition);
  if (replica == nullptr) {
    clock.status = NoReadableReplica(header.partition);
    out.tell_moved = true;
    Reply(out, from, header, clock);
    return out;
  }
  SetReadOptions ro;
  ro.batch_size = std::min(m.batch_size, options_.max_chunk_elements);
  ro.max_chunk_bytes = options_.max_chunk_bytes;
  ro.bounds = std::move(m.bounds);
  absl::StatusOr<std::unique_ptr<SetReader>> reader = replica->Read(m.set, ro);
  if (!reader.ok()) {
    clock.status = ReadErrorForReply(reader.status());
    Reply(out, from, header, clock);
    return out;
  }
  clock.clock = (*reader)->clock();
  Fold& fold = folds_[key];
  fold.partition = header.partition;
  fold.reader = std::move(*reader);
  fold.clock_message =
      EncodeMessage(header.request_id, header.partition, clock);
  fold.last_activity = now;
  out.sends.emplace_back(from, fold.clock_message);
  // The first chunk goes with the clock; each later one waits for its ack.
  SendNextChunk(key, fold, 0, out);
  WatchFold(key, out);
  return out;
}

void ReplicaService::SendNextChunk(const FoldKey& key, Fold& fold, uint64_t seq,
                                   ServiceOutput& out) {
  absl::StatusOr<bool> more = fold.reader->Next(&fold.buffer);
  if (!more.ok()) {
    // Corruption mid-fold: end it; the coordinator sees the replica go
    // silent and reads from the others.
    folds_.erase(key);
    return;
  }
  fold.done = !*more || fold.reader->AtEnd();
  fold.last_sent = seq;
  SendChunk(key, fold, out);
}

void ReplicaService::SendChunk(const FoldKey& key, const Fold& fold,
                               ServiceOutput& out) {
  // Encoded from the fold's buffer, which holds the last chunk until the
  // next one is produced: a retransmission encodes it again.
  std::string bytes;
  EncodeReadChunk(
      MessageHeader{MessageType::kReadChunk, key.second, fold.partition},
      fold.last_sent, fold.done, fold.buffer, &bytes);
  out.sends.emplace_back(key.first, std::move(bytes));
}

ServiceOutput ReplicaService::HandleChunkAck(NodeId from,
                                             const MessageHeader& header,
                                             const msg::ChunkAck& m,
                                             uint64_t now) {
  ServiceOutput out(header.partition);
  const FoldKey key{from, header.request_id};
  auto it = folds_.find(key);
  if (it == folds_.end()) return out;
  Fold& fold = it->second;
  fold.last_activity = now;
  if (m.seq == fold.last_sent + 1 && !fold.done) {
    SendNextChunk(key, fold, m.seq, out);
  } else if (m.seq == fold.last_sent) {
    SendChunk(key, fold, out);  // Retransmit.
    ++stats_->retransmits;
  }
  return out;
}

void ReplicaService::HandleStopFold(NodeId from, const MessageHeader& header) {
  folds_.erase({from, header.request_id});
}

void ReplicaService::HandleKeepFold(NodeId from, const MessageHeader& header,
                                    uint64_t now) {
  auto it = folds_.find({from, header.request_id});
  if (it != folds_.end()) it->second.last_activity = now;
}

void ReplicaService::WatchFold(const FoldKey& key, ServiceOutput& out) const {
  out.watch_fold = key;
  out.watch_micros = options_.fold_idle_timeout_micros;
}

ServiceOutput ReplicaService::FoldIdle(const FoldKey& key, uint64_t now) {
  ServiceOutput out;
  auto it = folds_.find(key);
  if (it == folds_.end()) return out;
  out.partition = it->second.partition;
  // A clock that went back (a late timer is fine) never expires a fold
  // early: idle time is measured forwards only.
  const uint64_t timeout = options_.fold_idle_timeout_micros;
  if (now >= it->second.last_activity &&
      now - it->second.last_activity >= timeout) {
    folds_.erase(it);
    ++stats_->folds_expired;
  } else {
    WatchFold(key, out);
  }
  return out;
}

}  // namespace bigset
