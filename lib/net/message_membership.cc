// The hand-off and membership messages, and the node states they carry.

#include <utility>

#include "net/message.h"
#include "net/message_body.h"

namespace bigset {
namespace message_internal {

void EncodeMembershipBody(const Message& m, std::string* dst) {
  switch (m.type()) {
    case MessageType::kTransferChunk:
      coding::PutVarint64(dst, m.epoch);
      coding::PutLengthPrefixed(dst, m.set);
      coding::PutVarint64(dst, m.index);
      coding::PutVarint64(dst, m.seq);
      dst->push_back(static_cast<char>((m.done ? 1 : 0) | (m.end ? 2 : 0)));
      if (m.done) coding::PutLengthPrefixed(dst, m.clock.Encode());
      PutElements(dst, m.elements);
      break;
    case MessageType::kTransferAck:
      PutStatus(dst, m.status);
      coding::PutVarint64(dst, m.index);
      coding::PutVarint64(dst, m.seq);
      coding::PutVarint64(dst, m.incarnation);
      break;
    case MessageType::kHandoffDone:
      coding::PutVarint64(dst, m.epoch);
      coding::PutVarint64(dst, m.from_node);
      coding::PutVarint64(dst, m.to_node);
      coding::PutVarint64(dst, m.episode);
      dst->push_back(static_cast<char>(m.supplement ? 1 : 0));
      break;
    case MessageType::kHandoffDoneAck:
      PutStatus(dst, m.status);
      coding::PutVarint64(dst, m.epoch);
      coding::PutVarint64(dst, m.from_node);
      coding::PutVarint64(dst, m.to_node);
      PutStates(dst, m.states);
      break;
    case MessageType::kMembership:
      coding::PutVarint64(dst, m.epoch);
      coding::PutVarint64(dst, m.versions.size());
      for (const auto& [node, version] : m.versions) {
        coding::PutVarint64(dst, node);
        coding::PutVarint64(dst, version);
      }
      PutStates(dst, m.states);
      break;
    case MessageType::kRingEpoch:
      coding::PutVarint64(dst, m.epoch);
      break;
    default:
      break;
  }
}

namespace {

bool DecodeTransferChunk(BodyReader* d, Message* m,
                         std::vector<ElementDots>* spare) {
  uint8_t flags = 0;
  if (!d->Varint(&m->epoch) || !d->String(&m->set) || !d->Varint(&m->index) ||
      !d->Varint(&m->seq) || !d->Byte(&flags) || flags > 3) {
    return false;
  }
  m->done = (flags & 1) != 0;
  m->end = (flags & 2) != 0;
  m->elements = std::move(*spare);
  return (!m->done || d->Clock(&m->clock)) && d->Elements(&m->elements);
}

bool DecodeMembership(BodyReader* d, Message* m) {
  uint64_t n = 0;
  if (!d->Varint(&m->epoch) || !d->Count(2, &n)) return false;
  m->versions.resize(static_cast<size_t>(n));
  for (auto& [node, version] : m->versions) {
    if (!d->Node(&node) || !d->Varint(&version)) return false;
  }
  return d->States(&m->states);
}

}  // namespace

bool DecodeMembershipBody(BodyReader* d, Message* m,
                          std::vector<ElementDots>* spare) {
  switch (m->type()) {
    case MessageType::kTransferChunk:
      return DecodeTransferChunk(d, m, spare);
    case MessageType::kTransferAck:
      return d->Status(&m->status) && d->Varint(&m->index) &&
             d->Varint(&m->seq) && d->Varint(&m->incarnation);
    case MessageType::kHandoffDone: {
      uint8_t supplement = 0;
      const bool ok = d->Varint(&m->epoch) && d->Node(&m->from_node) &&
                      d->Node(&m->to_node) && d->Varint(&m->episode) &&
                      d->Byte(&supplement) && supplement <= 1;
      m->supplement = supplement == 1;
      return ok;
    }
    case MessageType::kHandoffDoneAck:
      return d->Status(&m->status) && d->Varint(&m->epoch) &&
             d->Node(&m->from_node) && d->Node(&m->to_node) &&
             d->States(&m->states);
    case MessageType::kMembership:
      return DecodeMembership(d, m);
    case MessageType::kRingEpoch:
      return d->Varint(&m->epoch);
    default:
      return false;
  }
}

}  // namespace message_internal

void EncodeNodeStates(std::span<const NodeServing> states, std::string* dst) {
  message_internal::PutStates(dst, states);
}

absl::Status DecodeNodeStates(std::string_view in,
                              std::vector<NodeServing>* out) {
  message_internal::BodyReader d(in);
  if (!d.States(out) || !d.empty()) {
    return absl::DataLossError("undecodable node states");
  }
  return absl::OkStatus();
}

}  // namespace bigset
