#include "absl/strings/str_cat.h"
#include "bigset/cluster/membership_authority.h"
#include "core/coding.h"
#include "core/crc32c.h"

namespace bigset {
namespace {

// Version byte, then the epoch (varint), the map and the change
// (length-prefixed), then a CRC32C of all of it.
constexpr uint8_t kRecordFormatVersion = 1;

}  // namespace

std::string MembershipRecord::Encode() const {
  std::string out;
  out.push_back(static_cast<char>(kRecordFormatVersion));
  coding::PutVarint64(&out, epoch);
  coding::PutLengthPrefixed(&out, map);
  coding::PutLengthPrefixed(&out, change);
  crc32c::AppendChecksum(&out);
  return out;
}

absl::StatusOr<MembershipRecord> MembershipRecord::Decode(
    std::string_view bytes) {
  const absl::Status bad = absl::DataLossError("corrupt membership record");
  if (!crc32c::StripChecksum(&bytes)) return bad;
  coding::Reader in(bytes);
  uint8_t version = 0;
  MembershipRecord r;
  std::string_view map, change;
  if (!in.GetByte(&version) || !in.GetVarint64(&r.epoch) ||
      !in.GetLengthPrefixed(&map) || !in.GetLengthPrefixed(&change) ||
      !in.empty()) {
    return bad;
  }
  if (version != kRecordFormatVersion) {
    return absl::DataLossError(
        absl::StrCat("membership record of unknown format version ", version));
  }
  if (r.epoch == 0) return bad;
  r.map = std::string(map);
  r.change = std::string(change);
  return r;
}

}  // namespace bigset
