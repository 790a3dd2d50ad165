// HandoffManager, the receiving side: chunks of runs, and the answer to a
// proposal (see handoff.h).

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cluster/handoff.h"
#include "cluster/set_stream.h"
#include "core/status_macros.h"

namespace bigset {

void HandoffManager::SendAck(NodeId to, const Message& chunk,
                             const absl::Status& status) {
  Message ack;
  ack.header = MessageHeader{MessageType::kTransferAck, chunk.header.request_id,
                             chunk.header.partition};
  ack.status = status;
  ack.index = chunk.index;
  ack.seq = chunk.seq;
  ack.incarnation = incarnation_;
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
    finished_runs_[key] = p;
    // Bounded: a sender whose run is forgotten sends it again.
    if (finished_runs_.size() > 4096) {
      finished_runs_.erase(finished_runs_.begin());
    }
    SendAck(from, m, absl::OkStatus());
    return;
  }
  if (ring().PartitionOf(m.set) != p) {
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
  if (it == incoming_.end() || m.index > it->second.index) {
    // This node lost the set's state (a restart, or it expired).
    SendAck(from, m,
            StreamStateLost("transfer state lost; send the set again"));
    return;
  }
  if (m.index == it->second.index && m.seq > it->second.next_seq) {
    // Past a gap (a chunk before it lost or late: the sender keeps several
    // in flight): ignored, the sender sends it again after the gap.
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
  NodeCounters& stats = host_->stats();
  stats.handoff_keys_received += m.elements.size();
  ++in.next_seq;
  if (m.done) ++stats.handoff_sets_received;
  SendAck(from, m, absl::OkStatus());
  EnsureTick();  // Expires the state if the sender goes away.
}

void HandoffManager::HandleDone(NodeId from, const Message& m) {
  NoteEpoch(from, m.epoch);
  if (m.to_node != host_->node_id() || m.from_node != from ||
      m.header.partition >= ring().ring_size()) {
    return;
  }
  Message ack;
  ack.header = MessageHeader{MessageType::kHandoffDoneAck, m.header.request_id,
                             m.header.partition};
  ack.from_node = m.from_node;
  ack.to_node = m.to_node;
  ack.status = Accept(from, m);
  ack.epoch = ring().epoch();
  ack.states = {membership_.own()};
  host_->Send(from, ack.Encode());
}

absl::Status HandoffManager::Accept(NodeId from, const Message& m) {
  const uint32_t p = m.header.partition;
  const NodeId me = host_->node_id();
  uint64_t& latest = latest_proposal_[{from, p, m.episode}];
  if (m.header.request_id < latest) {
    return absl::FailedPreconditionError(
        absl::StrCat("a later proposal of node ", from, " for partition ", p,
                     " came first"));
  }
  latest = m.header.request_id;
  auto run = finished_runs_.find({from, m.header.request_id});
  if (run == finished_runs_.end() || run->second != p ||
      host_->LocalReplica(p) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", me, " did not keep run ", m.header.request_id,
                     " of partition ", p, "; send the partition again"));
  }
  const ServeEntry* mine = membership_.Own(p);
  if (m.supplement) {
    // Data only, for a node whose place this node (or one before it) took.
    if (mine == nullptr) {
      return absl::AbortedError(
          absl::StrCat("node ", me, " does not serve partition ", p));
    }
  } else if (mine != nullptr) {
    // The same place again (the sender ran again after a restart) is
    // accepted again; any other is not this node's to take.
    if (mine->took_from != from || mine->took_since != m.episode) {
      return absl::AlreadyExistsError(
          absl::StrCat("node ", me, " already serves partition ", p));
    }
  } else {
    for (const ServeEntry& e : membership_.own().entries) {
      if (e.partition == p && e.took_from == from &&
          e.took_since == m.episode) {
        // Taken before and handed on since: the sender's data goes to the
        // holder (its state shows where).
        return absl::AlreadyExistsError(absl::StrCat(
            "node ", me, " took and handed on this place of partition ", p));
      }
    }
    const std::vector<NodeId>& want = ring().PreferenceList(p);
    if (std::find(want.begin(), want.end(), me) == want.end()) {
      return absl::AbortedError(absl::StrCat(
          "the latest ring does not place partition ", p, " on node ", me));
    }
    BIGSET_RETURN_IF_ERROR(membership_.BeginServing(p, from, m.episode));
    PushOwnState(from);
    MembershipChanged();
    return absl::OkStatus();
  }
  // Synced, so that every chunk this node acknowledged is durable before
  // the sender lets go of its data.
  return membership_.Sync();
}

}  // namespace bigset
