#include "cluster/handoff.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bigset/keys/keys.h"
#include "core/coding.h"
#include "core/crc32c.h"
#include "core/string_view_compat.h"

namespace bigset {
namespace {

// The node's metadata keyspace (see node_impl.h).
constexpr KeyspaceId kMetaKeyspace = 0xFFFFFFFF;
constexpr std::string_view kRingKey = "ring";
constexpr std::string_view kServingKey = "serving";
constexpr std::string_view kReleasePrefix = "release/";
constexpr uint8_t kServingFormatVersion = 1;

std::string ReleaseName(uint32_t partition) {
  std::string name(kReleasePrefix);
  coding::PutFixed32BE(&name, partition);
  return name;
}

bool Contains(const std::vector<NodeId>& list, NodeId n) {
  return std::find(list.begin(), list.end(), n) != list.end();
}

bool SameNodes(std::vector<NodeId> a, std::vector<NodeId> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

std::string EncodeServing(const std::map<uint32_t, std::vector<NodeId>>& s) {
  std::string out;
  out.push_back(static_cast<char>(kServingFormatVersion));
  coding::PutVarint64(&out, s.size());
  for (const auto& [p, list] : s) {
    coding::PutVarint64(&out, p);
    coding::PutVarint64(&out, list.size());
    for (NodeId n : list) coding::PutVarint64(&out, n);
  }
  coding::PutFixed32BE(&out, crc32c::Value(out));
  return out;
}

absl::Status DecodeServing(std::string_view bytes, uint32_t ring_size,
                           std::map<uint32_t, std::vector<NodeId>>* out) {
  const absl::Status bad =
      absl::DataLossError("undecodable serving lists in the node's metadata");
  if (bytes.size() < 5) return bad;
  const uint32_t want =
      coding::DecodeFixed32BE(bytes.data() + bytes.size() - 4);
  bytes.remove_suffix(4);
  if (crc32c::Value(bytes) != want) return bad;
  coding::Reader in(bytes);
  uint8_t version = 0;
  uint64_t count = 0;
  if (!in.GetByte(&version) || version != kServingFormatVersion ||
      !in.GetCount(2, &count)) {
    return bad;
  }
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t p = 0, k = 0;
    if (!in.GetVarint64(&p) || p >= ring_size || !in.GetCount(1, &k) ||
        k == 0) {
      return bad;
    }
    std::vector<NodeId>& list = (*out)[static_cast<uint32_t>(p)];
    for (uint64_t j = 0; j < k; ++j) {
      uint64_t n = 0;
      if (!in.GetVarint64(&n) || n > UINT32_MAX) return bad;
      list.push_back(static_cast<NodeId>(n));
    }
  }
  if (!in.empty()) return bad;
  return absl::OkStatus();
}

}  // namespace

HandoffManager::HandoffManager(CoordinatorHost* host, Store* store,
                               const NodeOptions& options)
    : host_(host), store_(store), options_(options) {}

HandoffManager::~HandoffManager() = default;

const std::vector<NodeId>& HandoffManager::ServingList(
    uint32_t partition) const {
  auto it = serving_.find(partition);
  return it != serving_.end() ? it->second : latest_->PreferenceList(partition);
}

bool HandoffManager::Hosts(uint32_t partition) const {
  if (partition >= latest_->ring_size()) return false;
  const NodeId me = host_->node_id();
  return Contains(ServingList(partition), me) ||
         Contains(latest_->PreferenceList(partition), me);
}

absl::Status HandoffManager::Load(const Ring& ring) {
  std::string value;
  absl::Status s =
      store_->Get(ReadOptions(), MetadataKey(kMetaKeyspace, kRingKey), &value);
  if (absl::IsNotFound(s)) {
    fresh_ = true;
    latest_.emplace(ring);
    return Persist();
  }
  if (!s.ok()) return s;
  absl::StatusOr<Ring> stored = Ring::Decode(value);
  if (!stored.ok()) return stored.status();
  if (stored->epoch() > ring.epoch()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the store has seen ring epoch ", stored->epoch(),
                     "; open the node with that ring or a later one (got ",
                     ring.epoch(), ")"));
  }
  if (stored->epoch() == ring.epoch() && stored->Encode() != ring.Encode()) {
    return absl::InvalidArgumentError(
        absl::StrCat("two different rings with epoch ", ring.epoch(),
                     ": the one given and the one this store has seen"));
  }
  latest_.emplace(std::move(*stored));
  s = store_->Get(ReadOptions(), MetadataKey(kMetaKeyspace, kServingKey),
                  &value);
  if (s.ok()) {
    s = DecodeServing(value, latest_->ring_size(), &serving_);
    if (!s.ok()) return s;
  } else if (!absl::IsNotFound(s)) {
    return s;
  }
  // Releases a crash interrupted.
  const std::string prefix = MetadataKey(kMetaKeyspace, kReleasePrefix);
  std::unique_ptr<Iterator> it =
      store_->NewIterator(ReadOptions(), MetadataRange(kMetaKeyspace));
  for (it->Seek(prefix); it->Valid(); it->Next()) {
    const std::string_view key = it->key();
    if (key.substr(0, prefix.size()) != prefix) break;
    if (key.size() != prefix.size() + 4) {
      return absl::DataLossError("undecodable release marker");
    }
    releasing_.insert(coding::DecodeFixed32BE(key.data() + prefix.size()));
  }
  if (!it->status().ok()) return it->status();
  if (ring.epoch() > latest_->epoch()) return InstallRing(ring);
  return absl::OkStatus();
}

absl::Status HandoffManager::Persist() {
  WriteBatch batch;
  batch.Put(MetadataKey(kMetaKeyspace, kRingKey), latest_->Encode());
  if (serving_.empty()) {
    batch.Delete(MetadataKey(kMetaKeyspace, kServingKey));
  } else {
    batch.Put(MetadataKey(kMetaKeyspace, kServingKey), EncodeServing(serving_));
  }
  WriteOptions sync;
  sync.sync = true;
  return store_->Write(sync, batch);
}

void HandoffManager::Start() {
  Replan();
  EnsureReleaseTick();
}

absl::Status HandoffManager::InstallRing(const Ring& ring) {
  if (ring.ring_size() != latest_->ring_size()) {
    return absl::InvalidArgumentError(
        "a ring change cannot change the number of partitions");
  }
  if (ring.epoch() <= latest_->epoch()) {
    return absl::FailedPreconditionError(
        absl::StrCat("ring epoch ", ring.epoch(), " is not above the latest (",
                     latest_->epoch(), ")"));
  }
  std::map<uint32_t, std::vector<NodeId>> serving;
  for (uint32_t p = 0; p < ring.ring_size(); ++p) {
    const std::vector<NodeId>& now = ServingList(p);
    if (!SameNodes(now, ring.PreferenceList(p))) serving[p] = now;
  }
  const Ring previous = *latest_;
  std::map<uint32_t, std::vector<NodeId>> previous_serving = serving_;
  latest_.emplace(ring);
  serving_ = std::move(serving);
  absl::Status s = Persist();
  if (!s.ok()) {
    latest_.emplace(previous);
    serving_ = std::move(previous_serving);
    return s;
  }
  ++host_->stats().rings_installed;
  return absl::OkStatus();
}

void HandoffManager::Replan() {
  const NodeId me = host_->node_id();
  std::set<TransferKey> wanted;
  for (const auto& [p, list] : serving_) {
    for (const PartitionTransfer& t :
         PlanPartitionTransfers(p, list, latest_->PreferenceList(p))) {
      if (t.from == me) wanted.insert({t.partition, t.to});
    }
  }
  for (auto it = outgoing_.begin(); it != outgoing_.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    for (const auto& [id, bytes] : it->second.forwards) {
      forward_routes_.erase(id);
    }
    ++host_->stats().handoffs_cancelled;
    it = outgoing_.erase(it);
  }
  for (const TransferKey& key : wanted) outgoing_.try_emplace(key);
  EnsureTick();
  Tick();
}

void HandoffManager::HostingChanged() { host_->HostingChanged(); }

// ---- Sender.

void HandoffManager::StartRun(const TransferKey& key, Outgoing& out) {
  if (out.started) ++host_->stats().handoff_restarts;
  out.run = host_->NextRequestId();
  out.started = true;
  out.sets_done = false;
  out.index = 0;
  out.set.clear();
  out.reader.reset();
  out.inflight.clear();
  out.backoff_until = 0;
  out.seq = 0;
  // Deltas forwarded before this run are in the snapshots it sends; the
  // ones not yet acknowledged are still retransmitted (harmless).
  NextSet(key, out);
}

void HandoffManager::NextSet(const TransferKey& key, Outgoing& out) {
  Replica* replica = host_->LocalReplica(key.first);
  if (replica == nullptr) {
    out.backoff_until = host_->NowMicros() + options_.handoff_retry_micros;
    return;
  }
  std::optional<std::string> after;
  if (out.index > 0 || !out.set.empty()) after = out.set;
  absl::StatusOr<std::vector<std::string>> sets =
      replica->ListSets(std::move(after), 1);
  if (!sets.ok()) {
    out.backoff_until = host_->NowMicros() + options_.handoff_retry_micros;
    return;
  }
  if (sets->empty()) {
    Message end;
    end.header = MessageHeader{MessageType::kTransferChunk, out.run, key.first};
    end.epoch = latest_->epoch();
    end.end = true;
    end.index = out.index;
    out.inflight = end.Encode();
    out.inflight_end = true;
    out.inflight_last = false;
    out.seq = 0;
    out.last_send = host_->NowMicros();
    host_->Send(key.second, out.inflight);
    return;
  }
  out.set = std::move((*sets)[0]);
  OpenSet(key, out);
}

void HandoffManager::OpenSet(const TransferKey& key, Outgoing& out) {
  Replica* replica = host_->LocalReplica(key.first);
  SetReadOptions ro;
  ro.batch_size = options_.max_chunk_elements;
  ro.max_chunk_bytes = options_.max_chunk_bytes;
  absl::StatusOr<std::unique_ptr<SetReader>> reader =
      replica == nullptr ? absl::UnavailableError("no replica")
                         : replica->Read(out.set, ro);
  if (!reader.ok()) {
    out.backoff_until = host_->NowMicros() + options_.handoff_retry_micros;
    return;
  }
  out.reader = std::move(*reader);
  out.seq = 0;
  SendNextChunk(key, out);
}

void HandoffManager::SendNextChunk(const TransferKey& key, Outgoing& out) {
  absl::StatusOr<bool> more = out.reader->Next(&out.buffer);
  if (!more.ok()) {
    // The set restarts later, under a new index, from a new snapshot.
    out.reader.reset();
    out.inflight.clear();
    ++out.index;
    out.backoff_until = host_->NowMicros() + options_.handoff_retry_micros;
    return;
  }
  const bool last = !*more || out.reader->AtEnd();
  Message m;
  m.header = MessageHeader{MessageType::kTransferChunk, out.run, key.first};
  m.epoch = latest_->epoch();
  m.set = out.set;
  m.index = out.index;
  m.seq = out.seq;
  m.done = last;
  if (last) m.clock = out.reader->clock();
  m.elements = std::move(out.buffer);
  out.inflight = m.Encode();
  out.buffer = std::move(m.elements);
  out.inflight_last = last;
  out.inflight_end = false;
  out.last_send = host_->NowMicros();
  Node::Stats& stats = host_->stats();
  stats.handoff_keys_sent += out.buffer.size();
  stats.handoff_bytes_sent += out.inflight.size();
  if (last) out.reader.reset();
  host_->Send(key.second, out.inflight);
}

void HandoffManager::Resend(const TransferKey& key, Outgoing& out) {
  out.last_send = host_->NowMicros();
  ++host_->stats().retransmits;
  host_->Send(key.second, out.inflight);
}

void HandoffManager::HandleTransferAck(NodeId from, const Message& m) {
  const TransferKey key{m.header.partition, from};
  auto it = outgoing_.find(key);
  if (it == outgoing_.end()) return;
  Outgoing& out = it->second;
  if (!out.started || out.run != m.header.request_id || out.inflight.empty() ||
      m.index != out.index || m.seq != out.seq) {
    return;  // Stale or duplicate.
  }
  const uint64_t now = host_->NowMicros();
  if (m.status.ok()) {
    out.inflight.clear();
    out.backoff_until = 0;
    if (out.inflight_end) {
      out.sets_done = true;
      MaybeComplete(key);
    } else if (out.inflight_last) {
      ++out.index;
      NextSet(key, out);
    } else {
      ++out.seq;
      SendNextChunk(key, out);
    }
    return;
  }
  if (absl::IsFailedPrecondition(m.status)) {
    // The receiver lost the set's state (it restarted, or expired it): the
    // set again, from a new snapshot, under a new index.
    ++host_->stats().handoff_restarts;
    out.inflight.clear();
    out.reader.reset();
    ++out.index;
    OpenSet(key, out);
    return;
  }
  // Not ready (an older ring there, no replica yet) or refused: the same
  // chunk again later.
  out.backoff_until = now + 5 * options_.handoff_retry_micros;
}

void HandoffManager::OnApplied(uint32_t partition, const Delta& delta) {
  auto it = outgoing_.lower_bound({partition, 0});
  for (; it != outgoing_.end() && it->first.first == partition; ++it) {
    Outgoing& out = it->second;
    const uint64_t id = host_->NextRequestId();
    std::string bytes;
    EncodeDeltaMessage(MessageHeader{MessageType::kHandoffDelta, id, partition},
                       delta, &bytes);
    if (out.forward_bytes + bytes.size() > options_.handoff_forward_bytes) {
      // Over the bound: drop the queue; a new run sends every set again
      // (from snapshots taken after these deltas were applied).
      for (const auto& [fid, b] : out.forwards) forward_routes_.erase(fid);
      out.forwards.clear();
      out.forward_bytes = 0;
      ++host_->stats().handoff_forward_overflows;
      if (out.started) StartRun(it->first, out);
      continue;
    }
    out.forward_bytes += bytes.size();
    host_->Send(it->first.second, bytes);
    ++host_->stats().handoff_deltas_forwarded;
    out.forwards.emplace(id, std::move(bytes));
    forward_routes_[id] = it->first;
  }
}

void HandoffManager::HandleDeltaAck(NodeId from, uint64_t request_id,
                                    const absl::Status& status) {
  auto route = forward_routes_.find(request_id);
  if (route == forward_routes_.end() || route->second.second != from) return;
  const TransferKey key = route->second;
  auto it = outgoing_.find(key);
  if (it == outgoing_.end()) {
    forward_routes_.erase(route);
    return;
  }
  // Not ready there: kept, and retransmitted by the tick.
  if (absl::IsUnavailable(status)) return;
  Outgoing& out = it->second;
  auto f = out.forwards.find(request_id);
  if (f != out.forwards.end()) {
    out.forward_bytes -= f->second.size();
    out.forwards.erase(f);
  }
  forward_routes_.erase(route);
  MaybeComplete(key);
}

void HandoffManager::MaybeComplete(const TransferKey& key) {
  auto it = outgoing_.find(key);
  if (it == outgoing_.end()) return;
  if (it->second.sets_done && it->second.forwards.empty()) Complete(key);
}

void HandoffManager::Complete(const TransferKey& key) {
  const PartitionTransfer t{key.first, host_->node_id(), key.second};
  outgoing_.erase(key);
  ++host_->stats().handoffs_done;
  if (ApplyDone(t)) {
    // If this write fails the transfer is done all the same in memory; a
    // restart redoes it (idempotent).
    (void)Persist();
  }
  Announce(latest_->epoch(), t);
  HostingChanged();
  Replan();
}

bool HandoffManager::ApplyDone(const PartitionTransfer& t) {
  if (t.partition >= latest_->ring_size()) return false;
  std::vector<NodeId> list = ServingList(t.partition);
  auto from = std::find(list.begin(), list.end(), t.from);
  if (from == list.end()) return false;
  if (Contains(list, t.to)) {
    list.erase(from);
  } else {
    *from = t.to;
  }
  if (SameNodes(list, latest_->PreferenceList(t.partition))) {
    serving_.erase(t.partition);
  } else {
    serving_[t.partition] = std::move(list);
  }
  return true;
}

void HandoffManager::Announce(uint64_t epoch, const PartitionTransfer& t) {
  Announcement a;
  a.epoch = epoch;
  a.transfer = t;
  for (NodeId n : latest_->nodes()) a.waiting.insert(n);
  for (const auto& [p, list] : serving_) {
    for (NodeId n : list) a.waiting.insert(n);
  }
  a.waiting.insert(t.from);
  a.waiting.insert(t.to);
  a.waiting.erase(host_->node_id());
  Message m;
  m.header = MessageHeader{MessageType::kHandoffDone, 0, t.partition};
  m.epoch = epoch;
  m.from_node = t.from;
  m.to_node = t.to;
  const std::string bytes = m.Encode();
  for (NodeId n : a.waiting) host_->Send(n, bytes);
  if (!a.waiting.empty()) announcements_.push_back(std::move(a));
  EnsureTick();
}

void HandoffManager::HandleDone(NodeId from, const Message& m) {
  NoteEpoch(from, m.epoch);
  const PartitionTransfer t{m.header.partition, m.from_node, m.to_node};
  if (ApplyDone(t)) {
    (void)Persist();
    HostingChanged();
    Replan();
  }
  Message ack = m;
  ack.header.type = MessageType::kHandoffDoneAck;
  ack.epoch = latest_->epoch();
  host_->Send(from, ack.Encode());
}

void HandoffManager::HandleDoneAck(NodeId from, const Message& m) {
  NoteEpoch(from, m.epoch);
  for (auto it = announcements_.begin(); it != announcements_.end(); ++it) {
    if (it->transfer.partition == m.header.partition &&
        it->transfer.from == m.from_node && it->transfer.to == m.to_node) {
      it->waiting.erase(from);
      if (it->waiting.empty()) announcements_.erase(it);
      return;
    }
  }
}

void HandoffManager::NoteEpoch(NodeId from, uint64_t epoch) {
  if (epoch <= latest_->epoch() || !epochs_reported_.insert(epoch).second) {
    return;
  }
  ++host_->stats().stale_ring_reports;
  if (options_.on_stale_ring) options_.on_stale_ring(epoch, from);
}

void HandoffManager::TellMoved(NodeId to, uint32_t partition) {
  Message m;
  m.header = MessageHeader{MessageType::kRingEpoch, 0, partition};
  m.epoch = latest_->epoch();
  host_->Send(to, m.Encode());
}

// ---- Receiver.

void HandoffManager::SendAck(NodeId to, const Message& chunk,
                             const absl::Status& status) {
  Message ack;
  ack.header = MessageHeader{MessageType::kTransferAck, chunk.header.request_id,
                             chunk.header.partition};
  ack.status = status;
  ack.index = chunk.index;
  ack.seq = chunk.seq;
  host_->Send(to, ack.Encode());
}

void HandoffManager::HandleChunk(NodeId from, Message& m) {
  NoteEpoch(from, m.epoch);
  const uint32_t p = m.header.partition;
  Replica* replica = host_->LocalReplica(p);
  if (replica == nullptr) {
    SendAck(from, m,
            absl::UnavailableError(absl::StrCat("node ", host_->node_id(),
                                                " holds no replica of ", p)));
    return;
  }
  const std::pair<NodeId, uint64_t> key{from, m.header.request_id};
  if (m.end) {
    incoming_.erase(key);
    SendAck(from, m, absl::OkStatus());
    return;
  }
  if (latest_->PartitionOf(m.set) != p) {
    SendAck(from, m,
            absl::InvalidArgumentError("set does not belong to the partition"));
    return;
  }
  auto it = incoming_.find(key);
  if (m.seq == 0 && (it == incoming_.end() || m.index > it->second.index)) {
    Incoming fresh;
    fresh.index = m.index;
    fresh.set = m.set;
    it = incoming_.insert_or_assign(key, std::move(fresh)).first;
  }
  if (it == incoming_.end() || m.index > it->second.index ||
      (m.index == it->second.index && m.seq > it->second.next_seq)) {
    // This node lost the set's state (a restart, or it expired).
    SendAck(from, m,
            absl::FailedPreconditionError("transfer state lost; restart"));
    return;
  }
  Incoming& in = it->second;
  in.last_activity = host_->NowMicros();
  if (m.index < in.index || m.seq < in.next_seq || m.set != in.set) {
    if (m.index == in.index && m.set == in.set) {
      SendAck(from, m, absl::OkStatus());  // A duplicate: applied already.
    }
    return;
  }
  absl::Status s = replica->ApplyTransferChunk(m.set, m.elements, &in.tracker);
  if (s.ok() && m.done) s = replica->FinishTransfer(m.set, m.clock, in.tracker);
  if (!s.ok()) {
    incoming_.erase(it);
    SendAck(from, m, s);
    return;
  }
  Node::Stats& stats = host_->stats();
  stats.handoff_keys_received += m.elements.size();
  ++in.next_seq;
  if (m.done) ++stats.handoff_sets_received;
  SendAck(from, m, absl::OkStatus());
  EnsureTick();  // Expires the state if the sender goes away.
}

// ---- Timers.

void HandoffManager::EnsureTick() {
  if (tick_scheduled_) return;
  if (outgoing_.empty() && announcements_.empty() && incoming_.empty()) {
    return;
  }
  tick_scheduled_ = true;
  host_->After(options_.handoff_retry_micros, [this]() {
    tick_scheduled_ = false;
    Tick();
  });
}

void HandoffManager::Tick() {
  const uint64_t now = host_->NowMicros();
  const uint64_t retry = options_.handoff_retry_micros;
  size_t running = 0;
  for (auto& [key, out] : outgoing_) running += out.started;
  for (auto& [key, out] : outgoing_) {
    if (!out.started) {
      if (running >= options_.handoff_max_running) continue;
      if (host_->LocalReplica(key.first) == nullptr) continue;
      ++running;
      StartRun(key, out);
      continue;
    }
    const bool waiting = now < out.backoff_until;
    if (!waiting && out.inflight.empty() && !out.sets_done) {
      // An error stopped the run between sets: go on.
      if (out.reader != nullptr) {
        SendNextChunk(key, out);
      } else {
        // The set whose read failed, again (NextSet continues after the
        // set it is given).
        if (host_->LocalReplica(key.first) != nullptr && !out.set.empty()) {
          OpenSet(key, out);
        } else {
          NextSet(key, out);
        }
      }
    } else if (!waiting && !out.inflight.empty() &&
               (now < out.last_send || now - out.last_send >= retry)) {
      Resend(key, out);
    }
    for (const auto& [id, bytes] : out.forwards) host_->Send(key.second, bytes);
  }
  for (const Announcement& a : announcements_) {
    Message m;
    m.header =
        MessageHeader{MessageType::kHandoffDone, 0, a.transfer.partition};
    m.epoch = a.epoch;
    m.from_node = a.transfer.from;
    m.to_node = a.transfer.to;
    const std::string bytes = m.Encode();
    for (NodeId n : a.waiting) host_->Send(n, bytes);
  }
  const uint64_t idle = options_.fold_idle_timeout_micros;
  for (auto it = incoming_.begin(); it != incoming_.end();) {
    const uint64_t last = it->second.last_activity;
    if (now >= last && now - last >= idle) {
      it = incoming_.erase(it);
    } else {
      ++it;
    }
  }
  EnsureTick();
}

// ---- Release.

void HandoffManager::StartRelease(uint32_t partition) {
  if (!releasing_.insert(partition).second) return;
  WriteBatch batch;
  batch.Put(MetadataKey(kMetaKeyspace, ReleaseName(partition)), "");
  WriteOptions sync;
  sync.sync = true;
  // A failed marker write is not retried: the delete goes on, but a crash
  // before it finishes leaves keys nothing finds again (a known defect).
  (void)store_->Write(sync, batch);
  EnsureReleaseTick();
}

void HandoffManager::EnsureReleaseTick() {
  if (release_tick_scheduled_ || releasing_.empty()) return;
  release_tick_scheduled_ = true;
  host_->After(options_.sweep_interval_micros, [this]() {
    release_tick_scheduled_ = false;
    ReleaseTick();
  });
}

absl::StatusOr<bool> HandoffManager::ReleaseSome(uint32_t partition,
                                                 size_t max_keys) {
  const KeyRange range = KeyspaceRange(partition);
  std::unique_ptr<Iterator> it = store_->NewIterator(ReadOptions(), range);
  WriteBatch batch;
  size_t n = 0;
  uint64_t bytes = 0;
  for (it->SeekToFirst(); it->Valid() && n < max_keys; it->Next()) {
    batch.Delete(it->key());
    bytes += it->key().size() + it->value().size();
    ++n;
  }
  if (!it->status().ok()) return it->status();
  const bool done = n < max_keys;
  if (done) batch.Delete(MetadataKey(kMetaKeyspace, ReleaseName(partition)));
  absl::Status s = store_->Write(WriteOptions(), batch);
  if (!s.ok()) return s;
  host_->stats().handoff_keys_released += n;
  host_->stats().handoff_bytes_released += bytes;
  if (done) {
    (void)store_->CompactRange(range);
    ++host_->stats().partitions_released;
  }
  return done;
}

absl::Status HandoffManager::FinishReleaseNow(uint32_t partition) {
  if (!releasing_.count(partition)) return absl::OkStatus();
  for (;;) {
    absl::StatusOr<bool> done = ReleaseSome(partition, 10'000);
    if (!done.ok()) return done.status();
    if (*done) break;
  }
  releasing_.erase(partition);
  return absl::OkStatus();
}

void HandoffManager::ReleaseTick() {
  if (releasing_.empty()) return;
  const uint32_t p = *releasing_.begin();
  absl::StatusOr<bool> done =
      ReleaseSome(p, std::max<uint64_t>(1000, options_.sweep_keys_per_tick));
  if (done.ok() && *done) releasing_.erase(p);
  EnsureReleaseTick();
}

void HandoffManager::FillStats(Node::Stats* stats) const {
  stats->handoffs_pending = 0;
  stats->handoffs_running = 0;
  for (const auto& [key, out] : outgoing_) {
    if (out.started) {
      ++stats->handoffs_running;
    } else {
      ++stats->handoffs_pending;
    }
    stats->handoff_forward_bytes += out.forward_bytes;
  }
  stats->handoffs_incoming = incoming_.size();
  stats->partitions_releasing = releasing_.size();
  stats->ring_epoch = latest_->epoch();
  stats->partitions_moving = serving_.size();
}

}  // namespace bigset
