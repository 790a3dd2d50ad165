// Frames and handshakes (lib/network/framing.h) against hostile bytes:
// every prefix and extension of a valid handshake, random bytes with and
// without the magic, bit flips, and the limits of each field.

#include "network/framing.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>

#include "core/coding.h"

namespace bigset::framing {
namespace {

using Rng = std::mt19937_64;

uint64_t Uniform(Rng& rng, uint64_t lo, uint64_t hi) {
  return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
}

std::string RandomBytes(Rng& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(Uniform(rng, 0, 255));
  return s;
}

Handshake RandomHandshake(Rng& rng) {
  Handshake h;
  h.version = static_cast<uint8_t>(Uniform(rng, 0, 255));
  h.cluster = RandomBytes(rng, Uniform(rng, 0, 256));
  h.node = static_cast<NodeId>(Uniform(rng, 1, UINT32_MAX));
  h.epoch = Uniform(rng, 0, 3) == 0 ? UINT64_MAX : Uniform(rng, 0, 1 << 20);
  return h;
}

// What a decoded handshake must satisfy whatever the input.
void CheckBounds(const Handshake& h) {
  REQUIRE(h.node != 0);
  REQUIRE(h.cluster.size() <= 256);
}

TEST_CASE("handshakes round-trip and stay under the pre-handshake bound") {
  const uint64_t seed = 0x5eed0001;
  CAPTURE(seed);
  Rng rng(seed);
  for (int i = 0; i < 2000; ++i) {
    const Handshake h = RandomHandshake(rng);
    const std::string bytes = EncodeHandshake(h);
    REQUIRE(bytes.size() <= kMaxHandshakeBytes);
    absl::StatusOr<Handshake> back = DecodeHandshake(bytes);
    REQUIRE(back.ok());
    CHECK(back->version == h.version);
    CHECK(back->cluster == h.cluster);
    CHECK(back->node == h.node);
    CHECK(back->epoch == h.epoch);
  }
}

TEST_CASE("every prefix and every extension of a handshake is refused") {
  const uint64_t seed = 0x5eed0002;
  CAPTURE(seed);
  Rng rng(seed);
  for (int i = 0; i < 200; ++i) {
    const std::string bytes = EncodeHandshake(RandomHandshake(rng));
    for (size_t n = 0; n < bytes.size(); ++n) {
      CAPTURE(n);
      absl::StatusOr<Handshake> h = DecodeHandshake(bytes.substr(0, n));
      REQUIRE(absl::IsDataLoss(h.status()));
    }
    std::string longer = bytes;
    longer.push_back(static_cast<char>(Uniform(rng, 0, 255)));
    REQUIRE(absl::IsDataLoss(DecodeHandshake(longer).status()));
  }
}

TEST_CASE("random bytes and bit flips never crash the handshake decoder") {
  const uint64_t seed = 0x5eed0003;
  CAPTURE(seed);
  Rng rng(seed);
  int decoded = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes;
    switch (Uniform(rng, 0, 2)) {
      case 0:  // Noise.
        bytes = RandomBytes(rng, Uniform(rng, 0, 64));
        break;
      case 1:  // Noise after the magic.
        bytes = "BSHK" + RandomBytes(rng, Uniform(rng, 0, 64));
        break;
      default: {  // A valid handshake with a few bits flipped.
        bytes = EncodeHandshake(RandomHandshake(rng));
        const int flips = static_cast<int>(Uniform(rng, 1, 3));
        for (int f = 0; f < flips; ++f) {
          const size_t at = Uniform(rng, 0, bytes.size() - 1);
          bytes[at] = static_cast<char>(bytes[at] ^ (1 << Uniform(rng, 0, 7)));
        }
      }
    }
    absl::StatusOr<Handshake> h = DecodeHandshake(bytes);
    if (h.ok()) {
      ++decoded;
      CheckBounds(*h);
    } else {
      REQUIRE(absl::IsDataLoss(h.status()));
    }
  }
  // Flips in the cluster name or the epoch still decode: the loop saw both.
  CHECK(decoded > 0);
}

TEST_CASE("handshake fields past their limits are refused") {
  auto encode = [](std::string_view cluster, uint64_t node, uint64_t epoch) {
    std::string out("BSHK");
    out.push_back(static_cast<char>(kVersion));
    coding::PutLengthPrefixed(&out, cluster);
    coding::PutVarint64(&out, node);
    coding::PutVarint64(&out, epoch);
    return out;
  };
  CHECK(DecodeHandshake(encode("c", 1, 0)).ok());
  CHECK(DecodeHandshake(encode("", UINT32_MAX, UINT64_MAX)).ok());
  CHECK(DecodeHandshake(encode(std::string(256, 'x'), 7, 1)).ok());
  // Node 0 is no node; node ids are 32 bits; names at most 256 bytes.
  CHECK(absl::IsDataLoss(DecodeHandshake(encode("c", 0, 1)).status()));
  CHECK(absl::IsDataLoss(
      DecodeHandshake(encode("c", uint64_t{UINT32_MAX} + 1, 1)).status()));
  CHECK(absl::IsDataLoss(
      DecodeHandshake(encode(std::string(257, 'x'), 7, 1)).status()));
  // Another magic.
  std::string other = encode("c", 1, 0);
  other[0] = 'X';
  CHECK(absl::IsDataLoss(DecodeHandshake(other).status()));
}

TEST_CASE("frame headers carry any length and kind") {
  const uint64_t seed = 0x5eed0004;
  CAPTURE(seed);
  Rng rng(seed);
  for (Kind kind : {Kind::kMessage, Kind::kHandshake, Kind::kKeepAlive}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{4096}}) {
      const std::string payload = RandomBytes(rng, n);
      std::string frame;
      AppendFrame(kind, payload, &frame);
      REQUIRE(frame.size() == kHeaderBytes + n);
      const Header h = ParseHeader(frame);
      CHECK(h.length == n);
      CHECK(h.kind == static_cast<uint8_t>(kind));
      CHECK(KnownKind(h.kind));
      CHECK(frame.substr(kHeaderBytes) == payload);
    }
  }
  // The largest length a header can state, and kinds nobody sends.
  const std::string top("\xFF\xFF\xFF\xFF\x03", 5);
  CHECK(ParseHeader(top).length == UINT32_MAX);
  CHECK_FALSE(KnownKind(ParseHeader(top).kind));
  CHECK_FALSE(KnownKind(255));
}

}  // namespace
}  // namespace bigset::framing
