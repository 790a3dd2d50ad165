// HandoffManager, releases: deleting the keys of a partition this node no
// longer hosts (see handoff.h).

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bigset/keys/keys.h"
#include "cluster/handoff.h"
#include "core/coding.h"
#include "core/status_macros.h"

namespace bigset {
namespace {

// The node's metadata keyspace (see node_impl.h).
constexpr KeyspaceId kMetaKeyspace = 0xFFFFFFFF;
constexpr std::string_view kReleasePrefix = "release/";

std::string ReleaseName(uint32_t partition) {
  std::string name(kReleasePrefix);
  coding::PutFixed32BE(&name, partition);
  return name;
}

}  // namespace

absl::Status HandoffManager::LoadReleaseMarkers() {
  // Releases a crash interrupted.
  const std::string prefix = MetadataKey(kMetaKeyspace, kReleasePrefix);
  std::unique_ptr<Iterator> it =
      store_->NewIterator(ReadOptions(), MetadataRange(kMetaKeyspace));
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

void HandoffManager::StartRelease(uint32_t partition) {
  // Runs received into this replica no longer count for a completion, and
  // no chunk of a run in progress may be applied to a replica opened later
  // under what this one received. The receiver's incarnation for the
  // partition changes, so that a sender of a run in progress sends it all
  // again (its sets finished so far went to this replica).
  receiver_.ForgetPartition(partition);
  ++releases_[partition];
  if (!releasing_.insert(partition).second) return;
  unmarked_.insert(partition);
  WriteReleaseMarker(partition);
  EnsureReleaseTick();
}

void HandoffManager::WriteReleaseMarker(uint32_t partition) {
  WriteBatch batch;
  batch.Put(MetadataKey(kMetaKeyspace, ReleaseName(partition)), "");
  WriteOptions sync;
  sync.sync = true;
  // Until the marker is durable no key is deleted (ReleaseTick retries it):
  // a crash mid-delete must leave a range that is never served again.
  if (store_->Write(sync, batch).ok()) unmarked_.erase(partition);
}

void HandoffManager::ReleaseIfHeld(uint32_t partition) {
  if (releasing_.count(partition)) return;
  std::unique_ptr<Iterator> it =
      store_->NewIterator(ReadOptions(), KeyspaceRange(partition));
  it->SeekToFirst();
  if (it->Valid()) StartRelease(partition);
}

void HandoffManager::EnsureReleaseTick() {
  if (release_tick_scheduled_ || releasing_.empty()) return;
  release_tick_scheduled_ = true;
  out_.Arm(kReleaseTimer, options_.release_tick_micros);
}

absl::StatusOr<bool> HandoffManager::ReleaseSome(uint32_t partition,
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
  if (done) batch.Delete(MetadataKey(kMetaKeyspace, ReleaseName(partition)));
  BIGSET_RETURN_IF_ERROR(store_->Write(WriteOptions(), batch));
  stats_->handoff_keys_released += n;
  stats_->handoff_bytes_released += bytes;
  if (done) {
    (void)store_->CompactRange(range);
    ++stats_->partitions_released;
  }
  return done;
}

absl::Status HandoffManager::FinishReleaseNow(uint32_t partition) {
  if (!releasing_.count(partition)) return absl::OkStatus();
  if (unmarked_.count(partition)) {
    WriteReleaseMarker(partition);
    if (unmarked_.count(partition)) {
      return absl::UnavailableError(absl::StrCat(
          "cannot write the release marker of partition ", partition));
    }
  }
  for (;;) {
    absl::StatusOr<bool> done = ReleaseSome(partition, 10'000);
    if (!done.ok()) return done.status();
    if (*done) break;
  }
  releasing_.erase(partition);
  return absl::OkStatus();
}

void HandoffManager::ReleaseTick() {
  if (releasing_.empty()) return;
  const uint32_t p = *releasing_.begin();
  if (unmarked_.count(p)) {
    WriteReleaseMarker(p);
    if (unmarked_.count(p)) {
      EnsureReleaseTick();
      return;
    }
  }
  absl::StatusOr<bool> done = ReleaseSome(p, options_.release_keys_per_tick);
  if (done.ok() && *done) releasing_.erase(p);
  EnsureReleaseTick();
}

}  // namespace bigset
