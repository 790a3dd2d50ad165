#include "map_store.h"

#include <utility>

#include "bigset/keys/comparator.h"
#include "leveldb/slice.h"

namespace bigset::testing {

bool MapStore::KeyLess::operator()(std::string_view a,
                                   std::string_view b) const {
  return BigsetComparator()->Compare(leveldb::Slice(a.data(), a.size()),
                                     leveldb::Slice(b.data(), b.size())) < 0;
}

class MapStore::MapSnapshot final : public Snapshot {
 public:
  explicit MapSnapshot(uint64_t seq) : seq(seq) {}
  const uint64_t seq;
};

// Remembers its position by key and looks it up again under the lock on
// every move, so writes in between are harmless.
class MapStore::MapIterator final : public Iterator {
 public:
  MapIterator(MapStore* store, uint64_t seq, KeyRange range)
      : store_(store), seq_(seq), range_(std::move(range)) {}

  bool Valid() const override { return valid_; }
  void SeekToFirst() override { Position(range_.start, /*inclusive=*/true); }
  void Seek(std::string_view target) override {
    KeyLess less;
    Position(
        less(target, range_.start) ? std::string_view(range_.start) : target,
        /*inclusive=*/true);
  }
  void Next() override { Position(key_, /*inclusive=*/false); }
  std::string_view key() const override { return key_; }
  std::string_view value() const override { return value_; }
  absl::Status status() const override { return absl::OkStatus(); }

 private:
  void Position(std::string_view from, bool inclusive) {
    const std::string start(from);
    absl::MutexLock lock(&store_->mu_);
    auto it = inclusive ? store_->map_.lower_bound(start)
                        : store_->map_.upper_bound(start);
    KeyLess less;
    for (; it != store_->map_.end(); ++it) {
      if (!range_.limit.empty() && !less(it->first, range_.limit)) break;
      if (const std::string* v = Visible(it->second, seq_)) {
        key_ = it->first;
        value_ = *v;
        valid_ = true;
        return;
      }
    }
    valid_ = false;
  }

  MapStore* store_;
  const uint64_t seq_;
  const KeyRange range_;
  bool valid_ = false;
  std::string key_;
  std::string value_;
};

const std::string* MapStore::Visible(const std::vector<Version>& versions,
                                     uint64_t seq) {
  for (auto v = versions.rbegin(); v != versions.rend(); ++v) {
    if (v->seq <= seq) return v->value ? &*v->value : nullptr;
  }
  return nullptr;
}

uint64_t MapStore::SequenceOf(const ReadOptions& options) const {
  if (options.snapshot != nullptr) {
    // Every Snapshot this store hands out is a MapSnapshot.
    return static_cast<const MapSnapshot*>(options.snapshot)->seq;
  }
  absl::MutexLock lock(&mu_);
  return seq_;
}

absl::Status MapStore::Write(const WriteOptions&, const WriteBatch& batch) {
  absl::MutexLock lock(&mu_);
  const uint64_t seq = ++seq_;
  WriteBatch::Reader reader(batch);
  WriteBatch::Op op;
  while (reader.Next(&op)) {
    std::vector<Version>& versions = map_[std::string(op.key)];
    std::optional<std::string> value;
    if (op.is_put) value = std::string(op.value);
    if (!versions.empty() && versions.back().seq == seq) {
      versions.back().value = std::move(value);  // Later op in one batch.
    } else {
      versions.push_back(Version{seq, std::move(value)});
    }
  }
  return absl::OkStatus();
}

absl::Status MapStore::Get(const ReadOptions& options, std::string_view key,
                           std::string* value) {
  const uint64_t seq = SequenceOf(options);
  absl::MutexLock lock(&mu_);
  auto it = map_.find(key);
  const std::string* v = it == map_.end() ? nullptr : Visible(it->second, seq);
  if (v == nullptr) return absl::NotFoundError("no such key");
  *value = *v;
  return absl::OkStatus();
}

std::unique_ptr<Iterator> MapStore::NewIterator(const ReadOptions& options,
                                                KeyRange range) {
  return std::make_unique<MapIterator>(this, SequenceOf(options),
                                       std::move(range));
}

std::unique_ptr<const Snapshot> MapStore::GetSnapshot() {
  absl::MutexLock lock(&mu_);
  return std::make_unique<MapSnapshot>(seq_);
}

absl::Status MapStore::CompactRange(const KeyRange&) {
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> MapStore::ApproximateSize(const KeyRange& range) {
  absl::MutexLock lock(&mu_);
  uint64_t bytes = 0;
  KeyLess less;
  for (auto it = map_.lower_bound(range.start);
       it != map_.end() &&
       (range.limit.empty() || less(it->first, range.limit));
       ++it) {
    if (const std::string* v = Visible(it->second, seq_)) {
      bytes += it->first.size() + v->size();
    }
  }
  return bytes;
}

}  // namespace bigset::testing
