#include "bigset/delta.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "coding.h"

namespace bigset {
namespace {

void PutBytes(std::string* dst, std::string_view s) {
  coding::PutVarint64(dst, s.size());
  dst->append(s.data(), s.size());
}

bool GetBytes(coding::Reader* in, std::string_view* out) {
  uint64_t len = 0;
  return in->GetVarint64(&len) && len <= in->remaining() &&
         in->GetBytes(static_cast<size_t>(len), out);
}

bool GetDot(coding::Reader* in, Dot* d) {
  return in->GetFixed64BE(&d->actor) && in->GetVarint64(&d->counter) &&
         d->counter != 0;
}

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("malformed delta: ", what));
}

// Smallest encodings, used to bound counts before allocating.
constexpr size_t kMinOpBytes = 3;   // empty element, no add, no context
constexpr size_t kMinDotBytes = 9;  // fixed64 actor + 1-byte counter

}  // namespace

void Delta::EncodeTo(std::string* dst) const {
  // The ops (every replicated write) are sized once, then written through
  // a pointer; one reservation covers the header too.
  constexpr size_t kVarint = coding::kMaxVarint64Bytes;
  constexpr size_t kDot = 8 + kVarint;
  size_t bound = kVarint;
  for (const DeltaOp& op : ops) {
    bound +=
        2 * kVarint + 1 + op.element.size() + kDot * (1 + op.context.size());
  }
  dst->reserve(dst->size() + 2 + kVarint + set.size() + bound);
  dst->push_back(static_cast<char>(kFormatVersion));
  PutBytes(dst, set);
  dst->push_back(clear.has_value() ? 1 : 0);
  if (clear.has_value()) PutBytes(dst, clear->Encode());
  const size_t start = dst->size();
  dst->resize(start + bound);
  char* const base = dst->data();
  char* p = base + start;
  auto put_dot = [&p](Dot d) {
    coding::EncodeFixed64BE(p, d.actor);
    p += 8;
    p += coding::EncodeVarint64(p, d.counter);
  };
  p += coding::EncodeVarint64(p, ops.size());
  for (const DeltaOp& op : ops) {
    p += coding::EncodeVarint64(p, op.element.size());
    std::memcpy(p, op.element.data(), op.element.size());
    p += op.element.size();
    *p++ = op.add.has_value() ? 1 : 0;
    if (op.add.has_value()) put_dot(*op.add);
    p += coding::EncodeVarint64(p, op.context.size());
    for (Dot d : op.context) put_dot(d);
  }
  dst->resize(static_cast<size_t>(p - base));
}

absl::StatusOr<Delta> Delta::Decode(std::string_view bytes) {
  Delta d;
  absl::Status s = DecodeInto(bytes, &d);
  if (!s.ok()) return s;
  return d;
}

absl::Status Delta::DecodeInto(std::string_view bytes, Delta* out) {
  coding::Reader in(bytes);
  uint8_t version = 0;
  if (!in.GetByte(&version)) return Corrupt("empty");
  if (version != kFormatVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported delta format version ", version));
  }
  Delta& d = *out;
  std::string_view set;
  uint8_t flags = 0;
  if (!GetBytes(&in, &set)) return Corrupt("set name");
  d.set.assign(set);
  if (!in.GetByte(&flags) || flags > 1) return Corrupt("flags");
  d.clear.reset();
  if (flags & 1) {
    std::string_view clock;
    if (!GetBytes(&in, &clock)) return Corrupt("clear clock");
    absl::StatusOr<Clock> c = Clock::Decode(clock);
    if (!c.ok()) return Corrupt(c.status().message());
    d.clear = std::move(*c);
  }
  uint64_t nops = 0;
  if (!in.GetVarint64(&nops) || nops > in.remaining() / kMinOpBytes) {
    return Corrupt("op count");
  }
  d.ops.resize(static_cast<size_t>(nops));
  for (DeltaOp& op : d.ops) {
    std::string_view element;
    uint8_t has_add = 0;
    if (!GetBytes(&in, &element)) return Corrupt("element");
    op.element.assign(element);
    if (!in.GetByte(&has_add) || has_add > 1) return Corrupt("add flag");
    op.add.reset();
    if (has_add) {
      Dot dot;
      if (!GetDot(&in, &dot)) return Corrupt("add dot");
      op.add = dot;
    }
    uint64_t nctx = 0;
    if (!in.GetVarint64(&nctx) || nctx > in.remaining() / kMinDotBytes) {
      return Corrupt("context size");
    }
    op.context.resize(static_cast<size_t>(nctx));
    for (Dot& dot : op.context) {
      if (!GetDot(&in, &dot)) return Corrupt("context dot");
    }
  }
  if (!in.empty()) return Corrupt("trailing bytes");
  return absl::OkStatus();
}

}  // namespace bigset
