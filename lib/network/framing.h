// Frames on a node-to-node TCP connection (docs/FORMATS.md, "Frames").
// Internal header.
//
//   frame     = u32 BE payload length | u8 kind | payload
//   kind 0    = message: one encoded message (net/message.h)
//   kind 1    = handshake: "BSHK" | u8 framing version | bytes cluster name
//               | varint node id | varint ring epoch
//   kind 2    = keep-alive: empty
//
// Thread-safety: stateless functions.

#ifndef BIGSET_LIB_NETWORK_FRAMING_H_
#define BIGSET_LIB_NETWORK_FRAMING_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "bigset/net/transport.h"

namespace bigset::framing {

inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 5;
// The longest handshake payload (magic, version, a cluster name of at most
// 256 bytes, two varints) is under this.
inline constexpr size_t kMaxHandshakeBytes = 1024;

enum class Kind : uint8_t { kMessage = 0, kHandshake = 1, kKeepAlive = 2 };

struct Handshake {
  uint8_t version = kVersion;
  std::string cluster;
  NodeId node = 0;
  uint64_t epoch = 0;
};

// Appends a frame of `kind` carrying `payload` to *dst.
void AppendFrame(Kind kind, std::string_view payload, std::string* dst);
std::string EncodeHandshake(const Handshake& h);
// DataLoss for bytes that are not a handshake (any version is decoded: the
// caller refuses versions it does not speak).
absl::StatusOr<Handshake> DecodeHandshake(std::string_view payload);

// Parses the header at the start of `in` (at least kHeaderBytes).
struct Header {
  uint32_t length = 0;
  uint8_t kind = 0;
};
Header ParseHeader(std::string_view in);
bool KnownKind(uint8_t kind);

}  // namespace bigset::framing

#endif  // BIGSET_LIB_NETWORK_FRAMING_H_
