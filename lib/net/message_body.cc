#include "net/message_body.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/string_view_compat.h"

namespace bigset {
namespace message_internal {

void PutDots(std::string* dst, std::span<const Dot> dots) {
  coding::PutVarint64(dst, dots.size());
  for (Dot d : dots) coding::PutDot(dst, d.actor, d.counter);
}

void PutStatus(std::string* dst, const absl::Status& s) {
  coding::PutVarint64(dst, static_cast<uint64_t>(s.code()));
  coding::PutLengthPrefixed(dst, ToStd(s.message()));
}

void PutSummaries(std::string* dst, std::span<const SetSummary> summaries,
                  bool with_clocks) {
  coding::PutVarint64(dst, summaries.size());
  for (const SetSummary& s : summaries) {
    coding::PutLengthPrefixed(dst, s.set);
    coding::PutFixed64BE(dst, s.digest);
    coding::PutFixed64BE(dst, s.keys_digest);
    dst->push_back(static_cast<char>(s.tombstone_empty ? 1 : 0));
    if (with_clocks) coding::PutLengthPrefixed(dst, s.clock.Encode());
  }
}

void PutElements(std::string* dst, std::span<const ElementDots> elements) {
  size_t bound = coding::kMaxVarint64Bytes;
  for (const ElementDots& e : elements) {
    bound += 2 * coding::kMaxVarint64Bytes + e.element.size() +
             e.dots.size() * coding::kMaxDotBytes;
  }
  const size_t start = dst->size();
  dst->resize(start + bound);
  char* p = dst->data() + start;
  p += coding::EncodeVarint64(p, elements.size());
  for (const ElementDots& e : elements) {
    p += coding::EncodeVarint64(p, e.element.size());
    std::memcpy(p, e.element.data(), e.element.size());
    p += e.element.size();
    p += coding::EncodeVarint64(p, e.dots.size());
    for (Dot d : e.dots) p += coding::EncodeDot(p, d.actor, d.counter);
  }
  dst->resize(static_cast<size_t>(p - dst->data()));
}

void PutStates(std::string* dst, std::span<const NodeServing> states) {
  coding::PutVarint64(dst, states.size());
  for (const NodeServing& st : states) {
    coding::PutVarint64(dst, st.node);
    coding::PutVarint64(dst, st.version);
    coding::PutVarint64(dst, st.entries.size());
    for (const ServeEntry& e : st.entries) {
      coding::PutVarint64(dst, e.partition);
      coding::PutVarint64(dst, e.since);
      coding::PutVarint64(dst, e.took_from);
      coding::PutVarint64(dst, e.took_since);
      coding::PutVarint64(dst, e.handing_to);
      dst->push_back(static_cast<char>(e.departed ? 1 : 0));
    }
  }
}

void PutDelta(std::string* dst, const bigset::Delta& delta) {
  // The delta is appended, then its length inserted before it: a few bytes
  // moved instead of a temporary string.
  const size_t start = dst->size();
  delta.EncodeTo(dst);
  char len[coding::kMaxVarint64Bytes];
  const size_t n = coding::EncodeVarint64(len, dst->size() - start);
  dst->insert(start, len, n);
}

void PutBounds(std::string* dst, const ElementBounds& b, uint32_t batch_size) {
  dst->push_back(static_cast<char>(
      (b.start.has_value() ? 1 : 0) | (b.end.has_value() ? 2 : 0) |
      (b.start_inclusive ? 4 : 0) | (b.end_inclusive ? 8 : 0)));
  if (b.start.has_value()) coding::PutLengthPrefixed(dst, *b.start);
  if (b.end.has_value()) coding::PutLengthPrefixed(dst, *b.end);
  coding::PutVarint64(dst, batch_size);
}

absl::Status Malformed(MessageType type, std::string_view what) {
  return absl::DataLossError(absl::StrCat("malformed ", MessageTypeName(type),
                                          " message: ", ToAbsl(what)));
}

bool BodyReader::Node(NodeId* node) {
  uint64_t v = 0;
  if (!Varint(&v) || v > UINT32_MAX) return false;
  *node = static_cast<NodeId>(v);
  return true;
}

bool BodyReader::Dots(std::vector<Dot>* dots) {
  uint64_t n = 0;
  if (!Count(coding::kMinDotBytes, &n)) return false;
  dots->resize(static_cast<size_t>(n));
  for (Dot& d : *dots) {
    if (!in_.GetDot(&d.actor, &d.counter)) return false;
  }
  return true;
}

bool BodyReader::Status(absl::Status* s) {
  uint64_t code = 0;
  std::string_view msg;
  if (!in_.GetVarint64(&code) || code > kMaxStatusCode || !Bytes(&msg)) {
    return false;
  }
  *s = absl::Status(static_cast<absl::StatusCode>(code), ToAbsl(msg));
  return true;
}

bool BodyReader::Elements(std::vector<ElementDots>* elements) {
  uint64_t n = 0;
  if (!Count(kMinElementBytes, &n)) return false;
  elements->resize(static_cast<size_t>(n));
  for (ElementDots& e : *elements) {
    if (!String(&e.element) || !Dots(&e.dots)) return false;
  }
  return true;
}

bool BodyReader::Clock(bigset::Clock* clock) {
  std::string_view bytes;
  if (!Bytes(&bytes)) return false;
  absl::StatusOr<bigset::Clock> c = bigset::Clock::Decode(bytes);
  if (!c.ok()) return false;
  *clock = std::move(*c);
  return true;
}

bool BodyReader::Delta(bigset::Delta* delta) {
  std::string_view bytes;
  return Bytes(&bytes) && bigset::Delta::DecodeInto(bytes, delta).ok();
}

bool BodyReader::Bounds(ElementBounds* b, uint32_t* batch_size) {
  uint8_t flags = 0;
  if (!Byte(&flags) || flags > 15) return false;
  b->start_inclusive = (flags & 4) != 0;
  b->end_inclusive = (flags & 8) != 0;
  if ((flags & 1) && !String(&b->start.emplace())) return false;
  if ((flags & 2) && !String(&b->end.emplace())) return false;
  uint64_t batch = 0;
  if (!Varint(&batch) || batch < 1 || batch > UINT32_MAX) return false;
  *batch_size = static_cast<uint32_t>(batch);
  return true;
}

bool BodyReader::Summaries(std::vector<SetSummary>* out, bool with_clocks) {
  uint64_t n = 0;
  if (!Count(18, &n)) return false;
  out->resize(static_cast<size_t>(n));
  for (SetSummary& s : *out) {
    uint8_t flags = 0;
    if (!String(&s.set) || !Fixed64(&s.digest) || !Fixed64(&s.keys_digest) ||
        !Byte(&flags) || flags > 1) {
      return false;
    }
    s.tombstone_empty = flags == 1;
    if (with_clocks && !Clock(&s.clock)) return false;
  }
  return true;
}

bool BodyReader::States(std::vector<NodeServing>* out) {
  uint64_t n = 0;
  if (!Count(3, &n)) return false;
  out->resize(static_cast<size_t>(n));
  for (NodeServing& st : *out) {
    uint64_t k = 0;
    if (!Node(&st.node) || !Varint(&st.version) || !Count(6, &k)) {
      return false;
    }
    st.entries.resize(static_cast<size_t>(k));
    bool live = false;  // The current partition has a live entry.
    for (size_t i = 0; i < st.entries.size(); ++i) {
      ServeEntry& e = st.entries[i];
      uint64_t p = 0;
      uint8_t departed = 0;
      if (!Varint(&p) || p > UINT32_MAX || !Varint(&e.since) ||
          !Node(&e.took_from) || !Varint(&e.took_since) ||
          !Node(&e.handing_to) || !Byte(&departed) || departed > 1) {
        return false;
      }
      e.partition = static_cast<uint32_t>(p);
      e.departed = departed == 1;
      // Ascending by (partition, since); one live entry per partition.
      if (i > 0) {
        const ServeEntry& prev = st.entries[i - 1];
        if (e.partition < prev.partition ||
            (e.partition == prev.partition && e.since <= prev.since)) {
          return false;
        }
        if (e.partition != prev.partition) live = false;
      }
      if (!e.departed && std::exchange(live, true)) return false;
    }
  }
  return true;
}

}  // namespace message_internal
}  // namespace bigset
