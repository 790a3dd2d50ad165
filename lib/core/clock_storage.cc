#include "core/clock_storage.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/cloud_codec.h"
#include "core/coding.h"

namespace bigset::clock_storage {
namespace {

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("corrupt stored clock: ", what));
}

}  // namespace

namespace {

// Calls emit(entry) for each entry of the header of `clock`, in order, until
// it returns false; returns false iff it did.
template <typename Emit>
bool ForEachHeaderEntry(const Clock& clock, Emit emit) {
  auto v = clock.vv().begin();
  auto c = clock.cloud().begin();
  while (v != clock.vv().end() || c != clock.cloud().end()) {
    HeaderEntry e;
    if (c == clock.cloud().end() ||
        (v != clock.vv().end() && v->actor < c->actor)) {
      e = {v->actor, v->counter};
      ++v;
    } else if (v == clock.vv().end() || c->actor < v->actor) {
      e = {c->actor, 0};
      ++c;
    } else {
      e = {v->actor, v->counter};
      ++v;
      ++c;
    }
    if (!emit(e)) return false;
  }
  return true;
}

}  // namespace

std::vector<HeaderEntry> HeaderOf(const Clock& clock) {
  std::vector<HeaderEntry> out;
  HeaderOfInto(clock, &out);
  return out;
}

void HeaderOfInto(const Clock& clock, std::vector<HeaderEntry>* out) {
  out->clear();
  ForEachHeaderEntry(clock, [out](const HeaderEntry& e) {
    out->push_back(e);
    return true;
  });
}

bool HeaderMatches(const Clock& clock, const std::vector<HeaderEntry>& header) {
  size_t i = 0;
  return ForEachHeaderEntry(clock,
                            [&](const HeaderEntry& e) {
                              return i < header.size() && header[i++] == e;
                            }) &&
         i == header.size();
}

void EncodeHeader(const std::vector<HeaderEntry>& header, std::string* dst) {
  coding::PutVarint64(dst, header.size());
  for (const HeaderEntry& e : header) {
    coding::PutFixed64BE(dst, e.actor);
    coding::PutVarint64(dst, e.base);
  }
}

void EncodeHeader(const std::vector<HeaderEntry>& header,
                  const HeaderTrailer& trailer, std::string* dst) {
  EncodeHeader(header, dst);
  if (trailer.keys_digest.has_value()) {
    dst->push_back(static_cast<char>(kKeysDigestTag));
    coding::PutFixed64BE(dst, *trailer.keys_digest);
  }
  if (trailer.count.has_value()) {
    dst->push_back(static_cast<char>(kCountTag));
    coding::PutVarint64(dst, *trailer.count);
  }
}

namespace {

// Bit `i` of a window's bitmap.
bool Bit(const IntervalSet::Block& b, uint64_t i) {
  return (b.words[i / 64] >> (i % 64)) & 1;
}

// The 8 bits of `b` from bit `i` on (bits past the window are 0).
uint8_t ByteAt(const IntervalSet::Block& b, uint64_t i) {
  const uint64_t word = i / 64, shift = i % 64;
  uint64_t v = b.words[word] >> shift;
  if (shift > 56 && word + 1 < b.words.size()) {
    v |= b.words[word + 1] << (64 - shift);
  }
  return static_cast<uint8_t>(v);
}

// A segment of a dense window straight from its bitmap: one BITMAP segment
// of the bits from the first interval starting in [w, w + kSegmentWindow)
// to the last. `block` holds the dense window that contains w. False if the
// last interval goes on past the segment (then the generic path codes it
// as a run).
bool EncodeDenseSegment(const IntervalSet& cloud,
                        const IntervalSet::Block& block, uint64_t w,
                        std::string* dst) {
  const uint64_t base = w - IntervalSet::WindowOf(w);  // Offset in block.
  const uint64_t end = base + kSegmentWindow;          // Exclusive.
  uint64_t first = base;
  if (w > 0 && Bit(block, first) && cloud.Contains(w - 1)) {
    // The leading run continues an interval of the previous segment.
    while (first < end && Bit(block, first)) ++first;
  }
  while (first < end && !Bit(block, first)) ++first;
  if (first == end) return true;  // Nothing starts here; nothing written.
  uint64_t last = end - 1;
  while (!Bit(block, last)) --last;
  if (last == end - 1 && w + kSegmentWindow != 0 &&
      cloud.Contains(w + kSegmentWindow)) {
    return false;
  }
  const uint64_t nbytes = (last - first) / 8 + 1;
  coding::PutVarint64(dst, 1);  // One segment.
  coding::PutVarint64(dst, nbytes << 1 | 1);
  coding::PutVarint64(dst, first - base);  // Start, from cursor w.
  const size_t at = dst->size();
  dst->resize(at + nbytes);
  for (uint64_t k = 0; k < nbytes; ++k) {
    uint8_t byte = ByteAt(block, first + 8 * k);
    // Bits past `last` (the next segment's) are not this segment's.
    if (first + 8 * k + 7 > last) {
      byte &= static_cast<uint8_t>((1u << (last - (first + 8 * k) + 1)) - 1);
    }
    (*dst)[at + k] = static_cast<char>(byte);
  }
  return true;
}

}  // namespace

bool EncodeSegment(const IntervalSet& cloud, uint64_t w, std::string* dst) {
  if (const IntervalSet::Block* block =
          cloud.DenseWindow(IntervalSet::WindowOf(w))) {
    const size_t before = dst->size();
    if (EncodeDenseSegment(cloud, *block, w, dst)) return dst->size() > before;
  }
  std::vector<cloud_codec::Run> runs;
  auto it = cloud.LowerBound(w);
  // An interval that goes on from the previous window belongs to that
  // window's segment.
  if (it != cloud.end() && it->first == w && w > 0 && cloud.Contains(w - 1)) {
    ++it;
  }
  for (; it != cloud.end() && it->first - w < kSegmentWindow; ++it) {
    runs.push_back({it->first, it->second});
  }
  if (runs.empty()) return false;
  cloud_codec::EncodeRuns(runs, w, dst);
  return true;
}

absl::Status Loader::AddHeader(std::string_view value) {
  coding::Reader in(value);
  uint64_t n = 0;
  if (has_header_) return Corrupt("two headers");
  if (!in.GetCount(9, &n)) return Corrupt("header count");
  header_.resize(static_cast<size_t>(n));
  for (size_t i = 0; i < header_.size(); ++i) {
    HeaderEntry& e = header_[i];
    if (!in.GetFixed64BE(&e.actor) || !in.GetVarint64(&e.base)) {
      return Corrupt("header entry");
    }
    if (i > 0 && header_[i - 1].actor >= e.actor) {
      return Corrupt("header actors out of order");
    }
  }
  uint8_t last_tag = 0;
  while (!in.empty()) {
    uint8_t tag = 0;
    if (!in.GetByte(&tag) || tag <= last_tag) {
      return Corrupt("trailing bytes in header");
    }
    last_tag = tag;
    uint64_t v = 0;
    if (tag == kKeysDigestTag && in.GetFixed64BE(&v)) {
      trailer_.keys_digest = v;
    } else if (tag == kCountTag && in.GetVarint64(&v)) {
      trailer_.count = v;
    } else {
      return Corrupt("trailing bytes in header");
    }
  }
  has_header_ = true;
  return absl::OkStatus();
}

absl::Status Loader::AddSegment(ActorId actor, uint64_t w,
                                std::string_view value) {
  if (!has_header_) return Corrupt("segment without a header");
  if (SegmentOf(w) != w) return Corrupt("unaligned segment window");
  if (!std::binary_search(header_.begin(), header_.end(), HeaderEntry{actor, 0},
                          [](const HeaderEntry& a, const HeaderEntry& b) {
                            return a.actor < b.actor;
                          })) {
    return Corrupt(absl::StrCat("segment of actor ", absl::Hex(actor),
                                " that the header does not list"));
  }
  coding::Reader in(value);
  uint64_t nsegs = 0;
  IntervalSet part;
  if (!in.GetVarint64(&nsegs) || nsegs == 0) return Corrupt("segment count");
  absl::Status s = cloud_codec::DecodeRuns(&in, w, nsegs, &part);
  if (!s.ok()) return s;
  if (!in.empty()) return Corrupt("trailing bytes in segment");
  // Every interval must start in the window: anything past it can only be
  // the continuation of its last interval.
  const uint64_t end = w + (kSegmentWindow - 1);
  if (part.Last() > end && part.IntervalStart(part.Last()) > end) {
    return Corrupt("interval outside its window");
  }
  const bool same_actor = !clouds_.empty() && clouds_.back().first == actor;
  if (!clouds_.empty() && !same_actor && clouds_.back().first > actor) {
    return Corrupt("segments out of order");
  }
  if (same_actor) {
    // After the previous segment, and not touching it (intervals are
    // maximal).
    IntervalSet& cloud = clouds_.back().second;
    if (w <= last_window_ || part.First() < cloud.Last() ||
        part.First() - cloud.Last() < 2) {
      return Corrupt("segments overlap");
    }
    cloud.AppendAbove(std::move(part));
  } else {
    clouds_.emplace_back(actor, std::move(part));
  }
  last_window_ = w;
  return absl::OkStatus();
}

absl::StatusOr<Clock> Loader::Finish() {
  VersionVector vv;
  for (const HeaderEntry& e : header_) {
    if (e.base != 0) vv.Set(e.actor, e.base);
  }
  // Every header actor has a dot: a base or a cloud.
  for (const HeaderEntry& e : header_) {
    if (e.base != 0) continue;
    const bool has_cloud =
        std::any_of(clouds_.begin(), clouds_.end(),
                    [&](const auto& c) { return c.first == e.actor; });
    if (!has_cloud) return Corrupt("header actor without any dot");
  }
  return Clock::FromParts(std::move(vv), std::move(clouds_));
}

}  // namespace bigset::clock_storage
