#include "cluster/partition_release.h"

#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "bigset/keys/keys.h"
#include "cluster/node_metadata.h"
#include "core/coding.h"
#include "core/status_macros.h"

namespace bigset {
namespace {

constexpr std::string_view kReleasePrefix = "release/";

std::string ReleaseName(uint32_t partition) {
  std::string name(kReleasePrefix);
  coding::PutFixed32BE(&name, partition);
  return name;
}

}  // namespace

absl::Status PartitionRelease::Load() {
  const std::string prefix = MetadataKey(kNodeMetaKeyspace, kReleasePrefix);
  std::unique_ptr<Iterator> it =
      store_->NewIterator(ReadOptions(), MetadataRange(kNodeMetaKeyspace));
  for (it->Seek(prefix); it->Valid(); it->Next()) {
    const std::string_view key = it->key();
    if (key.substr(0, prefix.size()) != prefix) break;
    if (key.size() != prefix.size() + 4) {
      return absl::DataLossError("undecodable release marker");
    }
    releasing_.insert(coding::DecodeFixed32BE(key.data() + prefix.size()));
  }
  return it->status();
}

bool PartitionRelease::Start(uint32_t partition) {
  ++releases_[partition];
  if (!releasing_.insert(partition).second) return false;
  unmarked_.insert(partition);
  WriteMarker(partition);
  return true;
}

bool PartitionRelease::Holds(uint32_t partition) const {
  std::unique_ptr<Iterator> it =
      store_->NewIterator(ReadOptions(), KeyspaceRange(partition));
  it->SeekToFirst();
  return it->Valid();
}

void PartitionRelease::WriteMarker(uint32_t partition) {
  WriteBatch batch;
  batch.Put(MetadataKey(kNodeMetaKeyspace, ReleaseName(partition)), "");
  WriteOptions sync;
  sync.sync = true;
  if (store_->Write(sync, batch).ok()) unmarked_.erase(partition);
}

absl::StatusOr<bool> PartitionRelease::DeleteSome(uint32_t partition,
                                                  size_t max_keys) {
  const KeyRange range = KeyspaceRange(partition);
  std::unique_ptr<Iterator> it = store_->NewIterator(ReadOptions(), range);
  WriteBatch batch;
  size_t n = 0;
  uint64_t bytes = 0;
  for (it->SeekToFirst(); it->Valid() && n < max_keys; it->Next()) {
    batch.Delete(it->key());
    bytes += it->key().size() + it->value().size();
    ++n;
  }
  if (!it->status().ok()) return it->status();
  const bool done = n < max_keys;
  if (done)
    batch.Delete(MetadataKey(kNodeMetaKeyspace, ReleaseName(partition)));
  BIGSET_RETURN_IF_ERROR(store_->Write(WriteOptions(), batch));
  stats_->handoff_keys_released += n;
  stats_->handoff_bytes_released += bytes;
  if (done) {
    (void)store_->CompactRange(range);
    ++stats_->partitions_released;
  }
  return done;
}

absl::Status PartitionRelease::FinishNow(uint32_t partition) {
  if (!releasing_.contains(partition)) return absl::OkStatus();
  if (unmarked_.contains(partition)) {
    WriteMarker(partition);
    if (unmarked_.contains(partition)) {
      return absl::UnavailableError(absl::StrCat(
          "cannot write the release marker of partition ", partition));
    }
  }
  for (;;) {
    absl::StatusOr<bool> done = DeleteSome(partition, 10'000);
    if (!done.ok()) return done.status();
    if (*done) break;
  }
  releasing_.erase(partition);
  return absl::OkStatus();
}

void PartitionRelease::Tick(size_t max_keys) {
  if (releasing_.empty()) return;
  const uint32_t p = *releasing_.begin();
  if (unmarked_.contains(p)) {
    WriteMarker(p);
    if (unmarked_.contains(p)) return;
  }
  absl::StatusOr<bool> done = DeleteSome(p, max_keys);
  if (done.ok() && *done) releasing_.erase(p);
}

}  // namespace bigset
