// The hand-off and membership messages, and the node states they carry.

#include <utility>

#include "net/message.h"
#include "net/message_body.h"

namespace bigset {
namespace msg {

using message_internal::PutElements;
using message_internal::PutStates;
using message_internal::PutStatus;

void TransferChunk::EncodeBody(std::string* dst) const {
  coding::PutVarint64(dst, epoch);
  coding::PutLengthPrefixed(dst, set);
  coding::PutVarint64(dst, index);
  coding::PutVarint64(dst, seq);
  dst->push_back(static_cast<char>((last ? 1 : 0) | (end ? 2 : 0)));
  if (last) coding::PutLengthPrefixed(dst, set_clock.Encode());
  PutElements(dst, elements);
}

bool TransferChunk::DecodeBody(BodyReader* d) {
  uint8_t flags = 0;
  if (!d->Varint(&epoch) || !d->String(&set) || !d->Varint(&index) ||
      !d->Varint(&seq) || !d->Byte(&flags) || flags > 3) {
    return false;
  }
  last = (flags & 1) != 0;
  end = (flags & 2) != 0;
  return (!last || d->Clock(&set_clock)) && d->Elements(&elements);
}

void TransferAck::EncodeBody(std::string* dst) const {
  PutStatus(dst, status);
  coding::PutVarint64(dst, index);
  coding::PutVarint64(dst, seq);
  coding::PutVarint64(dst, incarnation);
}

bool TransferAck::DecodeBody(BodyReader* d) {
  return d->Status(&status) && d->Varint(&index) && d->Varint(&seq) &&
         d->Varint(&incarnation);
}

void HandoffDelta::EncodeBody(std::string* dst) const {
  message_internal::PutDelta(dst, delta);
}
bool HandoffDelta::DecodeBody(BodyReader* d) { return d->Delta(&delta); }

void HandoffDeltaAck::EncodeBody(std::string* dst) const {
  PutStatus(dst, status);
  coding::PutVarint64(dst, applied_by);
}

bool HandoffDeltaAck::DecodeBody(BodyReader* d) {
  return d->Status(&status) && d->Node(&applied_by);
}

void HandoffDone::EncodeBody(std::string* dst) const {
  coding::PutVarint64(dst, epoch);
  coding::PutVarint64(dst, from_node);
  coding::PutVarint64(dst, to_node);
  coding::PutVarint64(dst, episode);
  dst->push_back(static_cast<char>(supplement ? 1 : 0));
}

bool HandoffDone::DecodeBody(BodyReader* d) {
  uint8_t flag = 0;
  if (!d->Varint(&epoch) || !d->Node(&from_node) || !d->Node(&to_node) ||
      !d->Varint(&episode) || !d->Byte(&flag) || flag > 1) {
    return false;
  }
  supplement = flag == 1;
  return true;
}

void HandoffDoneAck::EncodeBody(std::string* dst) const {
  PutStatus(dst, status);
  coding::PutVarint64(dst, epoch);
  coding::PutVarint64(dst, from_node);
  coding::PutVarint64(dst, to_node);
  PutStates(dst, states);
}

bool HandoffDoneAck::DecodeBody(BodyReader* d) {
  return d->Status(&status) && d->Varint(&epoch) && d->Node(&from_node) &&
         d->Node(&to_node) && d->States(&states);
}

void RingEpoch::EncodeBody(std::string* dst) const {
  coding::PutVarint64(dst, epoch);
}
bool RingEpoch::DecodeBody(BodyReader* d) { return d->Varint(&epoch); }

void Membership::EncodeBody(std::string* dst) const {
  coding::PutVarint64(dst, epoch);
  coding::PutVarint64(dst, versions.size());
  for (const auto& [node, version] : versions) {
    coding::PutVarint64(dst, node);
    coding::PutVarint64(dst, version);
  }
  PutStates(dst, states);
}

bool Membership::DecodeBody(BodyReader* d) {
  uint64_t n = 0;
  if (!d->Varint(&epoch) || !d->Count(2, &n)) return false;
  versions.resize(static_cast<size_t>(n));
  for (auto& [node, version] : versions) {
    if (!d->Node(&node) || !d->Varint(&version)) return false;
  }
  return d->States(&states);
}

}  // namespace msg

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
