#include "cluster/request_ids.h"

#include <algorithm>
#include <random>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "bigset/keys/keys.h"
#include "cluster/node_metadata.h"
#include "core/coding.h"

namespace bigset {
namespace {

// Metadata key of the lease: version byte + fixed64 end.
constexpr std::string_view kLeaseKey = "request_id_lease";
constexpr uint8_t kLeaseFormatVersion = 1;
// Ids per lease: a restart skips what is left of its lease, so 2^32 per
// lease leaves room for 2^32 restarts in 64 bits.
constexpr uint64_t kLeaseSize = uint64_t{1} << 32;

}  // namespace

RequestIds::RequestIds(NodeId node, Store* store,
                       const std::function<uint64_t()>* random_source)
    : node_(node), store_(store), random_source_(random_source) {}

absl::Status RequestIds::Open() {
  std::string value;
  absl::Status s = store_->Get(
      ReadOptions(), MetadataKey(kNodeMetaKeyspace, kLeaseKey), &value);
  if (s.ok()) {
    uint64_t end = 0;
    if (!coding::DecodeVersionedFixed64(value, kLeaseFormatVersion, &end)) {
      return absl::DataLossError(
          absl::StrCat("node ", node_, ": undecodable request id lease"));
    }
    next_ = lease_end_ = end;
  } else if (absl::IsNotFound(s)) {
    // A new store. Its node id may have served before on a store now gone:
    // peers may still remember that store's request ids, so ids start at a
    // random lease, not at 1.
    uint64_t r = 0;
    if (*random_source_) {
      r = (*random_source_)();  // Seeded in the simulator.
    } else {
      std::random_device rd;
      r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    }
    // Mixed (splitmix64's finaliser), so that nearby sources give far
    // apart leases; below 2^62, leaving 2^30 leases of room.
    r = (r ^ (r >> 30)) * 0xbf58476d1ce4e5b9ULL;
    r = (r ^ (r >> 27)) * 0x94d049bb133111ebULL;
    r ^= r >> 31;
    const uint64_t base = (r >> 2) & ~(kLeaseSize - 1);
    next_ = lease_end_ = std::max(base, kLeaseSize);
  } else {
    return s;
  }
  return Extend();
}

absl::Status RequestIds::Extend() {
  const uint64_t end = lease_end_ + kLeaseSize;
  WriteBatch batch;
  batch.Put(MetadataKey(kNodeMetaKeyspace, kLeaseKey),
            coding::VersionedFixed64(kLeaseFormatVersion, end));
  WriteOptions sync;
  sync.sync = true;
  absl::Status s = store_->Write(sync, batch);
  if (s.ok()) lease_end_ = end;
  return s;
}

uint64_t RequestIds::Next() {
  if (next_ >= lease_end_) (void)Extend();  // Once per 2^32 ids; see header.
  return next_++;
}

}  // namespace bigset
