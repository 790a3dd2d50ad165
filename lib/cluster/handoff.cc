#include "cluster/handoff.h"

#include <algorithm>
#include <optional>
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
constexpr std::string_view kAnnounceKey = "announce";
constexpr uint8_t kAnnounceFormatVersion = 1;
constexpr std::string_view kMoveNumbersKey = "move_numbers";
constexpr uint8_t kMoveNumbersFormatVersion = 1;
constexpr size_t kMaxPendingNotices = 1024;
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
  crc32c::AppendChecksum(&out);
  return out;
}

// The body of a metadata record of `version` (after its version byte), or
// nullopt if the checksum or the version is wrong.
std::optional<coding::Reader> OpenRecord(std::string_view bytes,
                                         uint8_t version) {
  uint8_t found = 0;
  if (!crc32c::StripChecksum(&bytes)) return std::nullopt;
  coding::Reader in(bytes);
  if (!in.GetByte(&found) || found != version) return std::nullopt;
  return in;
}

absl::Status DecodeServing(std::string_view bytes, uint32_t ring_size,
                           std::map<uint32_t, std::vector<NodeId>>* out) {
  const absl::Status bad =
      absl::DataLossError("undecodable serving lists in the node's metadata");
  std::optional<coding::Reader> opened =
      OpenRecord(bytes, kServingFormatVersion);
  uint64_t count = 0;
  if (!opened.has_value() || !opened->GetCount(2, &count)) return bad;
  coding::Reader& in = *opened;
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

// Announcements: version, count, per announcement epoch, partition, from,
// to, the nodes still to tell; crc32c.
template <typename List>
std::string EncodeAnnouncements(const List& list) {
  std::string out;
  out.push_back(static_cast<char>(kAnnounceFormatVersion));
  coding::PutVarint64(&out, list.size());
  for (const auto& a : list) {
    coding::PutVarint64(&out, a.epoch);
    coding::PutVarint64(&out, a.transfer.partition);
    coding::PutVarint64(&out, a.transfer.from);
    coding::PutVarint64(&out, a.transfer.to);
    coding::PutVarint64(&out, a.move);
    coding::PutVarint64(&out, a.waiting.size());
    for (NodeId n : a.waiting) coding::PutVarint64(&out, n);
  }
  crc32c::AppendChecksum(&out);
  return out;
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
    latest_.emplace(ring);
    known_nodes_.insert(ring.nodes().begin(), ring.nodes().end());
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
  known_nodes_.insert(latest_->nodes().begin(), latest_->nodes().end());
  s = store_->Get(ReadOptions(), MetadataKey(kMetaKeyspace, kServingKey),
                  &value);
  if (s.ok()) {
    s = DecodeServing(value, latest_->ring_size(), &serving_);
    if (!s.ok()) return s;
  } else if (!absl::IsNotFound(s)) {
    return s;
  }
  s = store_->Get(ReadOptions(), MetadataKey(kMetaKeyspace, kMoveNumbersKey),
                  &value);
  if (s.ok()) {
    s = DecodeMoveNumbers(value);
    if (!s.ok()) return s;
  } else if (!absl::IsNotFound(s)) {
    return s;
  }
  s = store_->Get(ReadOptions(), MetadataKey(kMetaKeyspace, kAnnounceKey),
                  &value);
  if (s.ok()) {
    s = DecodeAnnouncements(value);
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

absl::Status HandoffManager::DecodeAnnouncements(std::string_view bytes) {
  const absl::Status bad =
      absl::DataLossError("undecodable announcements in the node's metadata");
  std::optional<coding::Reader> opened =
      OpenRecord(bytes, kAnnounceFormatVersion);
  uint64_t count = 0;
  if (!opened.has_value() || !opened->GetCount(6, &count)) return bad;
  coding::Reader& in = *opened;
  for (uint64_t i = 0; i < count; ++i) {
    Announcement a;
    uint64_t p = 0, from = 0, to = 0, k = 0;
    if (!in.GetVarint64(&a.epoch) || !in.GetVarint64(&p) ||
        p >= latest_->ring_size() || !in.GetVarint64(&from) ||
        from > UINT32_MAX || !in.GetVarint64(&to) || to > UINT32_MAX ||
        !in.GetVarint64(&a.move) || !in.GetCount(1, &k)) {
      return bad;
    }
    a.transfer =
        PartitionTransfer{static_cast<uint32_t>(p), static_cast<NodeId>(from),
                          static_cast<NodeId>(to)};
    for (uint64_t j = 0; j < k; ++j) {
      uint64_t n = 0;
      if (!in.GetVarint64(&n) || n > UINT32_MAX) return bad;
      a.waiting.insert(static_cast<NodeId>(n));
    }
    a.first_sent = host_->NowMicros();
    if (!a.waiting.empty()) announcements_.push_back(std::move(a));
  }
  if (!in.empty()) return bad;
  return absl::OkStatus();
}

absl::Status HandoffManager::DecodeMoveNumbers(std::string_view bytes) {
  const absl::Status bad =
      absl::DataLossError("undecodable move numbers in the node's metadata");
  std::optional<coding::Reader> opened =
      OpenRecord(bytes, kMoveNumbersFormatVersion);
  uint64_t count = 0;
  if (!opened.has_value() || !opened->GetCount(3, &count)) return bad;
  coding::Reader& in = *opened;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t p = 0, n = 0, e = 0;
    if (!in.GetVarint64(&p) || p >= latest_->ring_size() ||
        !in.GetVarint64(&n) || n > UINT32_MAX || !in.GetVarint64(&e)) {
      return bad;
    }
    move_numbers_[static_cast<uint32_t>(p)][static_cast<NodeId>(n)] = e;
  }
  if (!in.empty()) return bad;
  return absl::OkStatus();
}

void HandoffManager::AddPersistedState(WriteBatch* batch) const {
  if (move_numbers_.empty()) {
    batch->Delete(MetadataKey(kMetaKeyspace, kMoveNumbersKey));
  } else {
    std::string out;
    out.push_back(static_cast<char>(kMoveNumbersFormatVersion));
    size_t count = 0;
    for (const auto& [p, nodes] : move_numbers_) count += nodes.size();
    coding::PutVarint64(&out, count);
    for (const auto& [p, nodes] : move_numbers_) {
      for (const auto& [n, e] : nodes) {
        coding::PutVarint64(&out, p);
        coding::PutVarint64(&out, n);
        coding::PutVarint64(&out, e);
      }
    }
    crc32c::AppendChecksum(&out);
    batch->Put(MetadataKey(kMetaKeyspace, kMoveNumbersKey), out);
  }
  batch->Put(MetadataKey(kMetaKeyspace, kRingKey), latest_->Encode());
  if (serving_.empty()) {
    batch->Delete(MetadataKey(kMetaKeyspace, kServingKey));
  } else {
    batch->Put(MetadataKey(kMetaKeyspace, kServingKey),
               EncodeServing(serving_));
  }
  if (announcements_.empty()) {
    batch->Delete(MetadataKey(kMetaKeyspace, kAnnounceKey));
  } else {
    batch->Put(MetadataKey(kMetaKeyspace, kAnnounceKey),
               EncodeAnnouncements(announcements_));
  }
}

absl::Status HandoffManager::Persist() {
  WriteBatch batch;
  AddPersistedState(&batch);
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
  if (ring.n() != latest_->n()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ring change cannot change n, the replicas per partition (",
        latest_->n(), " -> ", ring.n(), ")"));
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
  known_nodes_.insert(previous.nodes().begin(), previous.nodes().end());
  known_nodes_.insert(ring.nodes().begin(), ring.nodes().end());
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
    // An accepted completion is finished whatever the ring says now: the
    // receiver serves the partition already. So is one proposed and not yet
    // answered (the receiver may have accepted it), unless the receiver
    // left the ring: cancelling it could leave the receiver serving in this
    // node's place while this node still serves.
    const auto& members = latest_->nodes();
    const bool proposed =
        it->second.proposed && std::find(members.begin(), members.end(),
                                         it->first.second) != members.end();
    if (wanted.count(it->first) || it->second.accepted || proposed) {
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
  Progress();
}

void HandoffManager::HostingChanged() {
  if (!host_->HostingChanged()) {
    hosting_retry_ = true;
    EnsureTick();
  }
  // A partition hosted here again is served from here, not passed on.
  std::erase_if(moved_to_, [&](const auto& m) {
    return Hosts(m.first) && !HandingOver(m.first);
  });
}

bool HandoffManager::HandingOver(uint32_t partition) const {
  auto it = outgoing_.lower_bound({partition, 0});
  for (; it != outgoing_.end() && it->first.first == partition; ++it) {
    if (it->second.accepted) return true;
  }
  return false;
}

bool HandoffManager::ProxyDelta(NodeId from, const MessageHeader& header,
                                const Delta& delta) {
  auto to = moved_to_.find(header.partition);
  if (to == moved_to_.end() || to->second == from ||
      to->second == host_->node_id()) {
    return false;
  }
  std::string bytes;
  if (header.type == MessageType::kRepair) {
    EncodeDeltaMessage(header, delta, &bytes);
  } else {
    const uint64_t id = host_->NextRequestId();
    EncodeDeltaMessage(
        MessageHeader{MessageType::kHandoffDelta, id, header.partition}, delta,
        &bytes);
    // A given-up request is answered like a replicate: this node did not
    // coordinate it (AnswerGivenUp found no reply of its own).
    proxied_[id] =
        Proxied{from,
                header.type == MessageType::kHandoffDelta
                    ? MessageType::kHandoffDeltaAck
                    : MessageType::kReplicateAck,
                header.request_id, header.partition, host_->NowMicros()};
    EnsureTick();  // Expires it if no answer comes.
  }
  ++host_->stats().handoff_deltas_proxied;
  host_->Send(to->second, std::move(bytes));
  return true;
}

// ---- Sender.

void HandoffManager::StartRun(const TransferKey& key, Outgoing& out) {
  if (out.started) ++host_->stats().handoff_restarts;
  out.run = host_->NextRequestId();
  out.started = true;
  out.sets_done = false;
  out.proposed = false;
  out.accepted = false;
  out.index = 0;
  out.have_set = false;
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
  if (out.have_set) after = out.set;
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
  out.have_set = true;
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
  if (!out.started || out.sets_done || out.run != m.header.request_id ||
      out.inflight.empty() || m.index != out.index || m.seq != out.seq) {
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
    // A run not started yet reads its sets after this delta: nothing to
    // forward (and no queue per waiting transfer).
    if (!out.started) continue;
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
  if (auto p = proxied_.find(request_id); p != proxied_.end()) {
    if (moved_to_.count(p->second.partition) == 0 ||
        moved_to_[p->second.partition] != from) {
      return;
    }
    std::string ack;
    EncodeStatusReply(MessageHeader{p->second.reply, p->second.request_id,
                                    p->second.partition},
                      status, &ack);
    host_->Send(p->second.coordinator, std::move(ack));
    proxied_.erase(p);
    return;
  }
  auto route = forward_routes_.find(request_id);
  if (route == forward_routes_.end() || route->second.second != from) return;
  const TransferKey key = route->second;
  auto it = outgoing_.find(key);
  if (it == outgoing_.end()) {
    forward_routes_.erase(route);
    return;
  }
  // Anything but a success or a rejection of the delta itself (it can never
  // apply there) keeps it, retransmitted by the tick: a receiver without
  // its replica yet, a failed write there.
  if (!status.ok() && !absl::IsInvalidArgument(status)) return;
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
  Outgoing& out = it->second;
  if (!out.sets_done || !out.forwards.empty()) return;
  if (out.accepted) {
    Complete(key);
  } else if (!out.proposed && host_->NowMicros() >= out.backoff_until) {
    Propose(key, out);
  }
}

void HandoffManager::Propose(const TransferKey& key, Outgoing& out) {
  Message m;
  m.header = MessageHeader{MessageType::kHandoffDone, out.run, key.first};
  m.epoch = latest_->epoch();
  m.from_node = host_->node_id();
  m.to_node = key.second;
  m.seq = MoveNumber(key.first);
  out.proposed = true;
  out.inflight = m.Encode();
  out.inflight_last = out.inflight_end = false;
  out.last_send = host_->NowMicros();
  host_->Send(key.second, out.inflight);
}

void HandoffManager::Complete(const TransferKey& key) {
  const PartitionTransfer t{key.first, host_->node_id(), key.second};
  const auto serving = serving_;
  const size_t announced = announcements_.size();
  const uint64_t it_move = outgoing_[key].move;
  const auto move_numbers = move_numbers_;
  ApplyDone(t);
  NoteMove(it_move, t);
  Announce(latest_->epoch(), it_move, t);
  // The new serving list and the announcement are persisted together
  // (announcements survive a restart until every node acknowledged them).
  // If the write fails nothing changes: the transfer stays accepted (writes
  // here paused) and the tick tries again.
  if (!Persist().ok()) {
    serving_ = serving;
    move_numbers_ = move_numbers;
    announcements_.resize(announced);
    EnsureTick();
    return;
  }
  outgoing_.erase(key);
  ++host_->stats().handoffs_done;
  for (NodeId n : announcements_.size() > announced
                      ? announcements_.back().waiting
                      : std::set<NodeId>{}) {
    host_->Send(n, AnnouncementBytes(announcements_.back()));
  }
  HostingChanged();
  Replan();
}

std::string HandoffManager::AnnouncementBytes(const Announcement& a) const {
  Message m;
  m.header = MessageHeader{MessageType::kHandoffDone, 0, a.transfer.partition};
  m.epoch = a.epoch;
  m.from_node = a.transfer.from;
  m.to_node = a.transfer.to;
  m.seq = a.move;
  return m.Encode();
}

bool HandoffManager::ApplyDone(const PartitionTransfer& t) {
  if (t.partition >= latest_->ring_size()) return false;
  std::vector<NodeId> list = ServingList(t.partition);
  auto from = std::find(list.begin(), list.end(), t.from);
  if (from == list.end()) return false;
  // `to` serves already (views that disagreed paired two senders with it):
  // not applicable, so that a list never shrinks; the sender keeps serving
  // and sends to the joiner still missing.
  if (Contains(list, t.to)) return false;
  *from = t.to;
  if (SameNodes(list, latest_->PreferenceList(t.partition))) {
    serving_.erase(t.partition);
  } else {
    serving_[t.partition] = std::move(list);
  }
  return true;
}

void HandoffManager::Announce(uint64_t epoch, uint64_t move,
                              const PartitionTransfer& t) {
  Announcement a;
  a.epoch = epoch;
  a.move = move;
  a.transfer = t;
  a.first_sent = host_->NowMicros();
  for (NodeId n : known_nodes_) a.waiting.insert(n);
  for (NodeId n : latest_->nodes()) a.waiting.insert(n);
  for (const auto& [p, list] : serving_) {
    for (NodeId n : list) a.waiting.insert(n);
  }
  // The receiver accepted (it knows); this node applied it.
  a.waiting.erase(t.to);
  a.waiting.erase(host_->node_id());
  if (!a.waiting.empty()) announcements_.push_back(std::move(a));
  EnsureTick();
}

void HandoffManager::HandleDone(NodeId from, const Message& m) {
  NoteEpoch(from, m.epoch);
  const NodeId me = host_->node_id();
  const PartitionTransfer t{m.header.partition, m.from_node, m.to_node};
  Message ack = m;
  ack.header.type = MessageType::kHandoffDoneAck;
  if (t.to == me && t.from == from) {
    ack.status = Accept(from, m, &ack.seq);
  } else if (t.to != me && t.from != me && t.partition < latest_->ring_size()) {
    // Another node's transfer. A node's own place in a serving list moves
    // only by its own acts (see handoff.h).
    if (ApplyNotice(m.seq, t)) {
      (void)Persist();
      HostingChanged();
      Replan();
    }
  }
  ack.epoch = latest_->epoch();
  host_->Send(from, ack.Encode());
}

uint64_t HandoffManager::MoveNumber(uint32_t partition) const {
  uint64_t most = 0;
  auto it = move_numbers_.find(partition);
  if (it == move_numbers_.end()) return 0;
  for (const auto& [n, move] : it->second) most = std::max(most, move);
  return most;
}

void HandoffManager::NoteMove(uint64_t move, const PartitionTransfer& t) {
  auto& seen = move_numbers_[t.partition];
  seen[t.from] = std::max(seen[t.from], move);
  seen[t.to] = std::max(seen[t.to], move);
}

bool HandoffManager::ApplyNotice(uint64_t move, const PartitionTransfer& t) {
  // Not above the numbers of both its nodes: late or repeated.
  auto stale = [&](uint64_t number, const PartitionTransfer& x) {
    auto seen = move_numbers_.find(x.partition);
    if (seen == move_numbers_.end()) return false;
    for (NodeId n : {x.from, x.to}) {
      auto it = seen->second.find(n);
      if (it != seen->second.end() && it->second >= number) return true;
    }
    return false;
  };
  auto apply = [&](uint64_t number, const PartitionTransfer& x) {
    if (stale(number, x) || !ApplyDone(x)) return false;
    NoteMove(number, x);
    return true;
  };
  if (stale(move, t)) return false;
  if (!apply(move, t)) {
    // Its `from` is not in the list yet, or its `to` is still there: an
    // earlier notice (one moving `from` in or `to` out) may be late. Kept
    // until it applies or turns stale (bounded).
    pending_notices_.emplace_back(move, t);
    if (pending_notices_.size() > kMaxPendingNotices) {
      pending_notices_.erase(pending_notices_.begin());
    }
    return false;
  }
  // Notices that waited for this one.
  for (bool again = true; again;) {
    again = false;
    for (auto it = pending_notices_.begin(); it != pending_notices_.end();) {
      if (stale(it->first, it->second)) {
        it = pending_notices_.erase(it);
      } else if (apply(it->first, it->second)) {
        pending_notices_.erase(it);
        again = true;
        break;
      } else {
        ++it;
      }
    }
  }
  return true;
}

absl::Status HandoffManager::Accept(NodeId from, const Message& m,
                                    uint64_t* number) {
  const uint32_t p = m.header.partition;
  auto run = finished_runs_.find({from, m.header.request_id});
  if (run == finished_runs_.end() || run->second.partition != p ||
      host_->LocalReplica(p) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", host_->node_id(), " did not keep run ", m.header.request_id,
        " of partition ", p, "; send the partition again"));
  }
  const NodeId me = host_->node_id();
  const PartitionTransfer t{p, from, me};
  // Numbered once: a repeated proposal (a lost answer) gets the same one.
  uint64_t& move = run->second.move;
  if (move == 0 && Contains(ServingList(p), me) &&
      Contains(ServingList(p), from)) {
    // This node serves the partition already, next to the sender, in a
    // third node's place: views that disagreed paired two senders with it.
    // Taking this one too would leave its list naming a node that released
    // the partition; the sender keeps serving, and sends to the node its
    // list misses once it hears of the other completion. (With the sender
    // not in the list this is the same transfer again, after this node
    // restarted and forgot its answer: accepted again.)
    return absl::AlreadyExistsError(
        absl::StrCat("node ", me, " already serves partition ", p));
  }
  if (move == 0) move = std::max(MoveNumber(p), m.seq) + 1;
  *number = move;
  ApplyDone(t);
  NoteMove(move, t);
  if (!Contains(ServingList(p), me)) {
    // This node's view of the list is behind (notices it missed): it puts
    // itself in place of a node the latest ring drops, or adds itself.
    std::vector<NodeId> list = ServingList(p);
    const std::vector<NodeId>& want = latest_->PreferenceList(p);
    auto gone = std::find_if(list.begin(), list.end(),
                             [&](NodeId n) { return !Contains(want, n); });
    if (gone != list.end()) {
      *gone = me;
    } else {
      list.push_back(me);
    }
    if (SameNodes(list, want)) {
      serving_.erase(p);
    } else {
      serving_[p] = std::move(list);
    }
  }
  // Synced: the chunks this node acknowledged are durable before the
  // sender releases them.
  absl::Status s = Persist();
  if (!s.ok()) return s;
  Replan();
  return absl::OkStatus();
}

void HandoffManager::HandleDoneAck(NodeId from, const Message& m) {
  NoteEpoch(from, m.epoch);
  if (m.from_node == host_->node_id() && m.to_node == from) {
    // The receiver's answer to this node's proposal.
    const TransferKey key{m.header.partition, from};
    auto it = outgoing_.find(key);
    if (it == outgoing_.end()) return;
    Outgoing& out = it->second;
    if (!out.proposed || out.accepted || out.run != m.header.request_id) {
      return;
    }
    out.inflight.clear();
    if (m.status.ok()) {
      // The receiver serves the partition: this replica is no longer used
      // (writes for it are passed on), and once the forwards drain the
      // transfer completes.
      out.accepted = true;
      out.move = m.seq;
      moved_to_[key.first] = from;
      MaybeComplete(key);
    } else if (absl::IsAlreadyExists(m.status)) {
      // The receiver serves the partition already (another sender's
      // transfer): proposed again later, unless a notice changes the plan.
      out.proposed = false;
      out.backoff_until =
          host_->NowMicros() + 5 * options_.handoff_retry_micros;
      Replan();
    } else {
      // The receiver no longer has what this run sent: send it again.
      out.backoff_until = host_->NowMicros() + options_.handoff_retry_micros;
      StartRun(key, out);
    }
    return;
  }
  for (auto it = announcements_.begin(); it != announcements_.end(); ++it) {
    if (it->transfer.partition == m.header.partition &&
        it->transfer.from == m.from_node && it->transfer.to == m.to_node) {
      if (it->waiting.erase(from) == 0) return;
      if (it->waiting.empty()) announcements_.erase(it);
      // Not synced: a crash only repeats a notice.
      WriteBatch batch;
      AddPersistedState(&batch);
      (void)store_->Write(WriteOptions(), batch);
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
    finished_runs_[key] = FinishedRun{p, 0};
    // Bounded: a sender whose run is forgotten sends it again.
    if (finished_runs_.size() > 4096)
      finished_runs_.erase(finished_runs_.begin());
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
  if (outgoing_.empty() && announcements_.empty() && incoming_.empty() &&
      proxied_.empty() && !hosting_retry_) {
    return;
  }
  tick_scheduled_ = true;
  host_->After(options_.handoff_retry_micros, [this]() {
    tick_scheduled_ = false;
    Tick();
  });
}

void HandoffManager::Progress() {
  const uint64_t now = host_->NowMicros();
  const uint64_t retry = options_.handoff_retry_micros;
  size_t running = 0;
  std::vector<TransferKey> to_complete;
  for (auto& [key, out] : outgoing_) running += out.started;
  for (auto& [key, out] : outgoing_) {
    if (out.accepted) {
      // Forwards drained, or a failed completion write: again.
      if (out.forwards.empty()) to_complete.push_back(key);
      continue;
    }
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
        if (host_->LocalReplica(key.first) != nullptr && out.have_set) {
          OpenSet(key, out);
        } else {
          NextSet(key, out);
        }
      }
    } else if (!waiting && !out.inflight.empty() &&
               (now < out.last_send || now - out.last_send >= retry)) {
      Resend(key, out);
    } else if (!waiting && out.sets_done && !out.proposed &&
               out.forwards.empty()) {
      Propose(key, out);  // After a refusal or a restart.
    }
  }
  for (const TransferKey& key : to_complete) MaybeComplete(key);
}

void HandoffManager::Tick() {
  const uint64_t now = host_->NowMicros();
  const uint64_t retry = options_.handoff_retry_micros;
  if (hosting_retry_) {
    hosting_retry_ = false;
    HostingChanged();
  }
  Progress();
  for (const auto& [key, out] : outgoing_) {
    for (const auto& [id, bytes] : out.forwards) host_->Send(key.second, bytes);
  }
  // A node that left the ring (and serves nothing) and has not answered for
  // a long time is dead or gone: it stops being told.
  const std::set<NodeId> members = [&] {
    std::set<NodeId> all(latest_->nodes().begin(), latest_->nodes().end());
    for (const auto& [p, list] : serving_) all.insert(list.begin(), list.end());
    return all;
  }();
  for (auto it = announcements_.begin(); it != announcements_.end();) {
    if (now >= it->first_sent && now - it->first_sent >= 100 * retry) {
      std::erase_if(it->waiting,
                    [&](NodeId n) { return members.count(n) == 0; });
    }
    it = it->waiting.empty() ? announcements_.erase(it) : std::next(it);
  }
  for (const Announcement& a : announcements_) {
    const std::string bytes = AnnouncementBytes(a);
    for (NodeId n : a.waiting) host_->Send(n, bytes);
  }
  std::erase_if(proxied_, [&](const auto& p) {
    return now < p.second.since || now - p.second.since >= 50 * retry;
  });
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
  // Runs received into this replica no longer count for a completion.
  std::erase_if(finished_runs_, [&](const auto& run) {
    return run.second.partition == partition;
  });
  if (!releasing_.insert(partition).second) return;
  unmarked_.insert(partition);
  WriteReleaseMarker(partition);
  EnsureReleaseTick();
}

void HandoffManager::WriteReleaseMarker(uint32_t partition) {
  WriteBatch batch;
  batch.Put(MetadataKey(kMetaKeyspace, ReleaseName(partition)), "");
  WriteOptions sync;
  sync.sync = true;
  // Until the marker is durable no key is deleted (ReleaseTick retries it):
  // a crash mid-delete must leave a range that is never served again.
  if (store_->Write(sync, batch).ok()) unmarked_.erase(partition);
}

void HandoffManager::ReleaseIfHeld(uint32_t partition) {
  if (releasing_.count(partition)) return;
  std::unique_ptr<Iterator> it =
      store_->NewIterator(ReadOptions(), KeyspaceRange(partition));
  it->SeekToFirst();
  if (it->Valid()) StartRelease(partition);
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
  if (unmarked_.count(partition)) {
    WriteReleaseMarker(partition);
    if (unmarked_.count(partition)) {
      return absl::UnavailableError(absl::StrCat(
          "cannot write the release marker of partition ", partition));
    }
  }
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
  if (unmarked_.count(p)) {
    WriteReleaseMarker(p);
    if (unmarked_.count(p)) {
      EnsureReleaseTick();
      return;
    }
  }
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
