// The type byte of every message between nodes, and the message format's
// version. Internal header (see net/message.h for the format).
//
// Thread-safety: constants and a stateless function.

#ifndef BIGSET_LIB_NET_MESSAGE_TYPE_H_
#define BIGSET_LIB_NET_MESSAGE_TYPE_H_

#include <cstdint>

namespace bigset {

// One value per message struct (net/replica_messages.h,
// net/membership_messages.h, net/anti_entropy_messages.h), in the order of
// MessageBody's alternatives: never renumber, only append.
enum class MessageType : uint8_t {
  kUpdate = 1,
  kUpdateReply = 2,
  kReplicate = 3,
  kReplicateAck = 4,
  kRead = 5,
  kReadClock = 6,
  kReadChunk = 7,
  kChunkAck = 8,
  kStopFold = 9,
  kQuery = 10,
  kQueryReply = 11,
  kRepair = 12,
  kKeepFold = 13,
  kClear = 14,
  kReplicateGivenUp = 15,
  kReplicateAckWithDelta = 16,
  kTransferChunk = 17,
  kTransferAck = 18,
  kHandoffDelta = 19,
  kHandoffDeltaAck = 20,
  kHandoffDone = 21,
  kHandoffDoneAck = 22,
  kRingEpoch = 23,
  kAeDigest = 24,
  kAeDigestReply = 25,
  kAeSets = 26,
  kAeSetsReply = 27,
  kAePull = 28,
  kAePush = 29,
  kAePushAck = 30,
  kMembership = 31,
  kCount = 32,
  kCountReply = 33,
};
inline constexpr uint8_t kMaxMessageType = 33;

// The type's name ("TransferChunk"); "Unknown" for a value out of range.
const char* MessageTypeName(MessageType type);

// Version 2: every message ends with a CRC32C of all its bytes before it.
// Version 3: membership by node-authored states (kMembership, episodes in
// proposals), incarnations in transfer acks, appliers in delta acks.
// Version 4: set streams (transfer and push acknowledgements) answer
// Aborted, and only Aborted, when the receiver lost the stream's state
// (cluster/set_stream.h).
inline constexpr uint8_t kMessageFormatVersion = 4;

}  // namespace bigset

#endif  // BIGSET_LIB_NET_MESSAGE_TYPE_H_
