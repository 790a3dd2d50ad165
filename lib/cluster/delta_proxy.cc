#include "cluster/delta_proxy.h"

#include <utility>

namespace bigset {

void DeltaProxy::ForgetWhere(absl::FunctionRef<bool(uint32_t)> pred) {
  std::erase_if(moved_to_, [&](const auto& m) { return pred(m.first); });
}

std::optional<DeltaProxy::Outgoing> DeltaProxy::PassOn(
    NodeId from, const MessageHeader& header, const Delta& delta,
    const Delta* own, uint64_t now) {
  auto to = moved_to_.find(header.partition);
  // A coordinator's delta goes to the new owner even when the new owner is
  // that coordinator (its list still named this node); a forward does not
  // go back to the node that forwarded it.
  if (to == moved_to_.end() || to->second == self_ ||
      (header.type == MessageType::kHandoffDelta && to->second == from)) {
    return std::nullopt;
  }
  Outgoing out{.to = to->second, .bytes = {}};
  if (header.type == MessageType::kRepair) {
    EncodeDeltaMessage(header, delta, &out.bytes);
    return out;
  }
  const uint64_t id = ids_->Next();
  EncodeDeltaMessage(
      MessageHeader{MessageType::kHandoffDelta, id, header.partition}, delta,
      &out.bytes);
  // A given-up request is answered like a replicate, or with this node's
  // own delta if it coordinated the request: either way only once the new
  // owner applied the chosen delta, since the answer counts this node's
  // place.
  Passed& p = passed_[id];
  p.coordinator = from;
  p.reply = header.type == MessageType::kHandoffDelta
                ? MessageType::kHandoffDeltaAck
                : MessageType::kReplicateAck;
  p.request_id = header.request_id;
  p.partition = header.partition;
  p.since = now;
  p.own.reset();
  if (own != nullptr) p.own = *own;
  return out;
}

bool DeltaProxy::OnAck(NodeId from, uint64_t request_id,
                       const absl::Status& status, NodeId applied_by,
                       const msg::PlaceTaken& taken,
                       std::optional<Outgoing>* answer) {
  answer->reset();
  auto p = passed_.find(request_id);
  if (p == passed_.end()) return false;
  if (PassesOnTo(p->second.partition) != from) return true;
  Outgoing out{.to = p->second.coordinator, .bytes = {}};
  if (p->second.own.has_value() && status.ok()) {
    // This node coordinated the given-up request: its delta, the write's
    // to replicate, answers for its place (the new owner applied the
    // chosen delta).
    out.bytes =
        EncodeMessage(p->second.request_id, p->second.partition,
                      msg::ReplicateAckWithDelta{std::move(*p->second.own)});
  } else {
    // The coordinator counts the node that applied the delta, not this
    // one: one replica acknowledges once however it is reached.
    EncodeStatusReply(MessageHeader{p->second.reply, p->second.request_id,
                                    p->second.partition},
                      status, applied_by, taken, &out.bytes);
  }
  *answer = std::move(out);
  passed_.erase(p);
  return true;
}

void DeltaProxy::Expire(uint64_t now, uint64_t max_age) {
  std::erase_if(passed_, [&](const auto& p) {
    return now < p.second.since || now - p.second.since >= max_age;
  });
}

}  // namespace bigset
