// The anti-entropy messages: digest rounds, set summaries, pulls and
// pushes; one struct per message type, each field with one meaning.
// Internal header; see net/message.h for the framing and docs/FORMATS.md
// for the bytes.
//
//   initiator -> peer               peer -> initiator
//   AeDigest                        AeDigestReply
//   AeSets                          AeSetsReply
//   AePull                          (none: the peer pushes those dots)
//   either way:
//   AePush                          AePushAck
//
// EncodeBody appends a struct's body; DecodeBody fills a default-constructed
// struct (whose `elements` may hold storage to reuse) from *d, leaving the
// fields the body omits at their defaults, and returns false on malformed
// or truncated bytes.
//
// Thread-safety: value types.

#ifndef BIGSET_LIB_NET_ANTI_ENTROPY_MESSAGES_H_
#define BIGSET_LIB_NET_ANTI_ENTROPY_MESSAGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bigset/core/clock.h"
#include "bigset/core/element_dots.h"
#include "bigset/core/set_summary.h"
#include "net/message_type.h"

namespace bigset {
namespace message_internal {
class BodyReader;
}  // namespace message_internal

namespace msg {

using message_internal::BodyReader;

// Starts a round: the initiator's partition digest and its number of
// buckets.
struct AeDigest {
  static constexpr MessageType kType = MessageType::kAeDigest;
  static constexpr const char* kName = "AeDigest";
  uint64_t digest = 0;
  uint64_t bucket_count = 0;

  friend bool operator==(const AeDigest&, const AeDigest&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// Whether the partition digests were equal, and if not the peer's bucket
// digests.
struct AeDigestReply {
  static constexpr MessageType kType = MessageType::kAeDigestReply;
  static constexpr const char* kName = "AeDigestReply";
  absl::Status status;
  bool digests_equal = false;
  std::vector<uint64_t> bucket_digests;

  friend bool operator==(const AeDigestReply&, const AeDigestReply&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// The ids of the buckets that differ, and the initiator's summaries
// (without clocks) of the sets in them.
struct AeSets {
  static constexpr MessageType kType = MessageType::kAeSets;
  static constexpr const char* kName = "AeSets";
  std::vector<uint64_t> bucket_ids;
  std::vector<SetSummary> summaries;

  friend bool operator==(const AeSets&, const AeSets&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// The peer's summaries, with clocks, of the sets that differ.
struct AeSetsReply {
  static constexpr MessageType kType = MessageType::kAeSetsReply;
  static constexpr const char* kName = "AeSetsReply";
  absl::Status status;
  std::vector<SetSummary> summaries;

  friend bool operator==(const AeSetsReply&, const AeSetsReply&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// Asks the peer to push the dots of `set` in `dots` (which the sender
// lacks).
struct AePull {
  static constexpr MessageType kType = MessageType::kAePull;
  static constexpr const char* kName = "AePull";
  std::string set;
  Clock dots;

  friend bool operator==(const AePull&, const AePull&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// One chunk of a push (a set stream: cluster/set_stream.h): its sequence
// number within the set (from 0), and on the set's last chunk the dots
// pushed (the receiver takes those of them without a key sent for removed
// at the sender: never the sender's whole set-clock, only what it read).
struct AePush {
  static constexpr MessageType kType = MessageType::kAePush;
  static constexpr const char* kName = "AePush";
  std::string set;
  uint64_t seq = 0;
  bool last = false;
  Clock dots;
  std::vector<ElementDots> elements;

  friend bool operator==(const AePush&, const AePush&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

// Acknowledges a push's chunks up to `seq`, or says why not.
struct AePushAck {
  static constexpr MessageType kType = MessageType::kAePushAck;
  static constexpr const char* kName = "AePushAck";
  absl::Status status;
  uint64_t seq = 0;

  friend bool operator==(const AePushAck&, const AePushAck&) = default;

  void EncodeBody(std::string* dst) const;
  bool DecodeBody(BodyReader* d);
};

}  // namespace msg
}  // namespace bigset

#endif  // BIGSET_LIB_NET_ANTI_ENTROPY_MESSAGES_H_
