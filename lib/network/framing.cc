#include "network/framing.h"

#include "core/coding.h"

namespace bigset::framing {
namespace {

constexpr std::string_view kMagic = "BSHK";
constexpr size_t kMaxClusterName = 256;

}  // namespace

void AppendFrame(Kind kind, std::string_view payload, std::string* dst) {
  coding::PutFixed32BE(dst, static_cast<uint32_t>(payload.size()));
  dst->push_back(static_cast<char>(kind));
  dst->append(payload);
}

std::string EncodeHandshake(const Handshake& h) {
  std::string out(kMagic);
  out.push_back(static_cast<char>(h.version));
  coding::PutLengthPrefixed(&out, h.cluster);
  coding::PutVarint64(&out, h.node);
  coding::PutVarint64(&out, h.epoch);
  return out;
}

absl::StatusOr<Handshake> DecodeHandshake(std::string_view payload) {
  const absl::Status bad = absl::DataLossError("malformed handshake");
  if (payload.substr(0, kMagic.size()) != kMagic) return bad;
  coding::Reader in(payload.substr(kMagic.size()));
  Handshake h;
  std::string_view cluster;
  uint64_t node = 0;
  if (!in.GetByte(&h.version) || !in.GetLengthPrefixed(&cluster) ||
      cluster.size() > kMaxClusterName || !in.GetVarint64(&node) ||
      node > UINT32_MAX || node == 0 || !in.GetVarint64(&h.epoch) ||
      !in.empty()) {
    return bad;
  }
  h.cluster.assign(cluster);
  h.node = static_cast<NodeId>(node);
  return h;
}

Header ParseHeader(std::string_view in) {
  return Header{coding::DecodeFixed32BE(in.data()),
                static_cast<uint8_t>(in[4])};
}

bool KnownKind(uint8_t kind) {
  return kind <= static_cast<uint8_t>(Kind::kKeepAlive);
}

}  // namespace bigset::framing
