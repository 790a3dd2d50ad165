// HandoffManager, the receiving side: chunks of runs, and the answer to a
// proposal (see handoff.h).

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cluster/handoff.h"
#include "core/status_macros.h"

namespace bigset {

void HandoffManager::SendAck(NodeId to, const MessageHeader& header,
                             const msg::TransferChunk& chunk,
                             const absl::Status& status) {
  const msg::TransferAck ack{.status = status,
                             .index = chunk.index,
                             .seq = chunk.seq,
                             .incarnation = IncarnationOf(header.partition)};
  out_.Send(to, EncodeMessage(header.request_id, header.partition, ack));
}

uint64_t HandoffManager::IncarnationOf(uint32_t partition) const {
  const uint64_t releases = release_.Releases(partition);
  if (releases == 0) return incarnation_;
  // Another value for every release of the partition since the node opened.
  const uint64_t mixed = incarnation_ ^ (releases * 0x9e3779b97f4a7c15ULL);
  return mixed == 0 ? 1 : mixed;
}

void HandoffManager::OnMessage(NodeId from, const MessageHeader& header,
                               msg::TransferChunk& m) {
  NoteEpoch(from, m.epoch);
  const uint32_t p = header.partition;
  Replica* replica = LocalNow(p);
  if (replica == nullptr) {
    SendAck(from, header, m,
            absl::UnavailableError(
                absl::StrCat("node ", self_, " holds no replica of ", p)));
    return;
  }
  if (m.end) {
    // After every set: the run is whole here (its proposal may come).
    receiver_.Finish(from, header.request_id, p);
    SendAck(from, header, m, absl::OkStatus());
    return;
  }
  const SetStreamChunk chunk =
      SetStreamChunk::Of(from, header, m.index, &m.set_clock, m);
  const SetStreamReceiver::Received r =
      receiver_.Receive(chunk, ring().PartitionOf(m.set), replica, now_);
  if (!r.answer.has_value()) return;  // Past a gap: the sender goes back.
  NodeCounters& stats = *stats_;
  stats.handoff_keys_received += r.keys;
  if (r.set_done) ++stats.handoff_sets_received;
  SendAck(from, header, m, *r.answer);
  EnsureTick();  // Expires the state if the sender goes away.
}

void HandoffManager::OnMessage(NodeId from, const MessageHeader& header,
                               const msg::HandoffDone& m) {
  NoteEpoch(from, m.epoch);
  if (m.to_node != self_ || m.from_node != from ||
      header.partition >= ring().ring_size()) {
    return;
  }
  msg::HandoffDoneAck ack;
  ack.status = Accept(from, header, m);
  ack.epoch = ring().epoch();
  ack.from_node = m.from_node;
  ack.to_node = m.to_node;
  ack.states = {membership_.own()};
  out_.Send(from, EncodeMessage(header.request_id, header.partition, ack));
}

absl::Status HandoffManager::Accept(NodeId from, const MessageHeader& header,
                                    const msg::HandoffDone& m) {
  const uint32_t p = header.partition;
  if (!Partition(p).TakeProposal(from, m.episode, header.request_id)) {
    return absl::FailedPreconditionError(
        absl::StrCat("a later proposal of node ", from, " for partition ", p,
                     " came first"));
  }
  PartitionHandoff::ProposalFacts facts{
      .self = self_,
      .from = from,
      .run = header.request_id,
      .episode = m.episode,
      .supplement = m.supplement,
      .run_received =
          receiver_.FinishedPartition(from, header.request_id) == p &&
          LocalNow(p) != nullptr,
      .serving_took = std::nullopt,
      .took_and_handed_on = false,
      .placed_here = Contains(ring().PreferenceList(p), self_)};
  if (const ServeEntry* mine = membership_.Own(p)) {
    facts.serving_took = std::make_pair(mine->took_from, mine->took_since);
  }
  for (const ServeEntry& e : membership_.own().entries) {
    facts.took_and_handed_on |=
        e.partition == p && e.took_from == from && e.took_since == m.episode;
  }
  auto [decision, status] = PartitionHandoff::Accept(p, facts);
  switch (decision) {
    case PartitionHandoff::AcceptDo::kRefuse:
      return status;
    case PartitionHandoff::AcceptDo::kBeginServing:
      BIGSET_RETURN_IF_ERROR(membership_.BeginServing(p, from, m.episode));
      PushOwnState(from);
      MembershipChanged();
      return absl::OkStatus();
    case PartitionHandoff::AcceptDo::kSync:
      // Synced, so that every chunk this node acknowledged is durable
      // before the sender lets go of its data.
      return membership_.Sync();
  }
  return absl::InternalError("unreachable");
}

}  // namespace bigset
