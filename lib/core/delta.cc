#include "bigset/core/delta.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/coding.h"

namespace bigset {
namespace {

bool GetDot(coding::Reader* in, Dot* d) {
  return in->GetDot(&d->actor, &d->counter);
}

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("malformed delta: ", what));
}

// Smallest encoding of an op (empty element, no add, no context), to bound
// counts before allocating.
constexpr size_t kMinOpBytes = 3;

}  // namespace

void Delta::EncodeTo(std::string* dst) const {
  // The ops (every replicated write) are sized once, then written through
  // a pointer; one reservation covers the header too.
  constexpr size_t kVarint = coding::kMaxVarint64Bytes;
  constexpr size_t kDot = coding::kMaxDotBytes;
  size_t bound = kVarint;
  for (const DeltaOp& op : ops) {
    bound +=
        2 * kVarint + 1 + op.element.size() + kDot * (1 + op.context.size());
  }
  dst->reserve(dst->size() + 2 + kVarint + set.size() + bound);
  dst->push_back(static_cast<char>(kFormatVersion));
  coding::PutLengthPrefixed(dst, set);
  dst->push_back(clear.has_value() ? 1 : 0);
  if (clear.has_value()) coding::PutLengthPrefixed(dst, clear->Encode());
  const size_t start = dst->size();
  dst->resize(start + bound);
  char* const base = dst->data();
  char* p = base + start;
  auto put_dot = [&p](Dot d) { p += coding::EncodeDot(p, d.actor, d.counter); };
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
  if (!in.GetLengthPrefixed(&set)) return Corrupt("set name");
  d.set.assign(set);
  if (!in.GetByte(&flags) || flags > 1) return Corrupt("flags");
  d.clear.reset();
  if (flags & 1) {
    std::string_view clock;
    if (!in.GetLengthPrefixed(&clock)) return Corrupt("clear clock");
    absl::StatusOr<Clock> c = Clock::Decode(clock);
    if (!c.ok()) return Corrupt(c.status().message());
    d.clear = std::move(*c);
  }
  uint64_t nops = 0;
  if (!in.GetCount(kMinOpBytes, &nops)) {
    return Corrupt("op count");
  }
  d.ops.resize(static_cast<size_t>(nops));
  for (DeltaOp& op : d.ops) {
    std::string_view element;
    uint8_t has_add = 0;
    if (!in.GetLengthPrefixed(&element)) return Corrupt("element");
    op.element.assign(element);
    if (!in.GetByte(&has_add) || has_add > 1) return Corrupt("add flag");
    op.add.reset();
    if (has_add) {
      Dot dot;
      if (!GetDot(&in, &dot)) return Corrupt("add dot");
      op.add = dot;
    }
    uint64_t nctx = 0;
    if (!in.GetCount(coding::kMinDotBytes, &nctx)) {
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
