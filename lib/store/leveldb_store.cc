#include "bigset/store/leveldb_store.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bigset/keys/comparator.h"
#include "bigset/keys/keys.h"
#include "core/string_view_compat.h"
#include "leveldb/cache.h"
#include "leveldb/comparator.h"
#include "leveldb/filter_policy.h"
#include "leveldb/iterator.h"
#include "leveldb/write_batch.h"

namespace bigset {
namespace {

leveldb::Slice ToSlice(std::string_view s) {
  return leveldb::Slice(s.data(), s.size());
}

class LevelDbSnapshot final : public Snapshot {
 public:
  LevelDbSnapshot(leveldb::DB* db, const leveldb::Snapshot* snapshot)
      : db_(db), snapshot_(snapshot) {}
  ~LevelDbSnapshot() override { db_->ReleaseSnapshot(snapshot_); }

  const leveldb::Snapshot* get() const { return snapshot_; }

 private:
  leveldb::DB* db_;
  const leveldb::Snapshot* snapshot_;
};

leveldb::ReadOptions ToLevelDb(const ReadOptions& options) {
  leveldb::ReadOptions o;
  o.fill_cache = options.fill_cache;
  o.verify_checksums = options.verify_checksums;
  if (options.snapshot != nullptr) {
    // Every Snapshot a LevelDbStore hands out is a LevelDbSnapshot.
    o.snapshot = static_cast<const LevelDbSnapshot*>(options.snapshot)->get();
  }
  return o;
}

// Iterates [range.start, range.limit) of a LevelDB iterator.
class LevelDbIterator final : public Iterator {
 public:
  LevelDbIterator(leveldb::Iterator* it, const leveldb::Comparator* cmp,
                  KeyRange range)
      : it_(it),
        cmp_(cmp),
        range_(std::move(range)),
        bigset_limit_(IsBigsetKey(range_.limit)) {}

  bool Valid() const override { return valid_; }

  void SeekToFirst() override {
    it_->Seek(ToSlice(range_.start));
    Update();
  }

  void Seek(std::string_view target) override {
    leveldb::Slice t = ToSlice(target);
    if (cmp_->Compare(t, ToSlice(range_.start)) < 0) {
      t = ToSlice(range_.start);
    }
    it_->Seek(t);
    Update();
  }

  void Next() override {
    it_->Next();
    Update();
  }

  std::string_view key() const override {
    leveldb::Slice k = it_->key();
    return std::string_view(k.data(), k.size());
  }

  std::string_view value() const override {
    leveldb::Slice v = it_->value();
    return std::string_view(v.data(), v.size());
  }

  absl::Status status() const override {
    return FromLevelDbStatus(it_->status());
  }

 private:
  void Update() {
    if (!it_->Valid()) {
      valid_ = false;
    } else if (bigset_limit_) {
      // Bigset keys compare bytewise among themselves and before all other
      // keys, under any wrapped comparator: skip the virtual call.
      leveldb::Slice k = it_->key();
      valid_ = IsBigsetKey(std::string_view(k.data(), k.size())) &&
               k.compare(ToSlice(range_.limit)) < 0;
    } else {
      valid_ = range_.limit.empty() ||
               cmp_->Compare(it_->key(), ToSlice(range_.limit)) < 0;
    }
  }

  std::unique_ptr<leveldb::Iterator> it_;
  const leveldb::Comparator* cmp_;
  KeyRange range_;
  const bool bigset_limit_;
  bool valid_ = false;
};

}  // namespace

absl::Status FromLevelDbStatus(const leveldb::Status& s) {
  if (s.ok()) return absl::OkStatus();
  std::string msg = s.ToString();
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsCorruption()) return absl::DataLossError(msg);
  if (s.IsInvalidArgument()) return absl::InvalidArgumentError(msg);
  if (s.IsNotSupportedError()) return absl::UnimplementedError(msg);
  if (s.IsIOError()) return absl::UnavailableError(msg);
  return absl::InternalError(msg);
}

LevelDbStore::LevelDbStore(leveldb::DB* db, Ownership ownership)
    : db_(db), ownership_(ownership) {}

LevelDbStore::~LevelDbStore() {
  // The database must close before the comparator, cache and filter policy
  // its options point to are destroyed (members are destroyed after this).
  if (ownership_ == Ownership::kOwned) delete db_;
}

absl::StatusOr<std::unique_ptr<LevelDbStore>> LevelDbStore::Open(
    std::string_view path, const LevelDbStoreOptions& options) {
  if (options.bloom_bits_per_key < 0) {
    return absl::InvalidArgumentError("bloom_bits_per_key must be >= 0");
  }
  std::unique_ptr<leveldb::Comparator> comparator;
  if (options.wrapped_comparator != nullptr &&
      options.wrapped_comparator != leveldb::BytewiseComparator()) {
    comparator = NewBigsetComparator(options.wrapped_comparator);
  }
  std::unique_ptr<leveldb::Cache> cache(
      leveldb::NewLRUCache(options.block_cache_bytes));
  std::unique_ptr<const leveldb::FilterPolicy> filter;
  if (options.bloom_bits_per_key > 0) {
    filter.reset(leveldb::NewBloomFilterPolicy(options.bloom_bits_per_key));
  }

  leveldb::Options o;
  o.comparator = comparator ? comparator.get() : BigsetComparator();
  o.create_if_missing = options.create_if_missing;
  o.error_if_exists = options.error_if_exists;
  o.paranoid_checks = options.paranoid_checks;
  o.block_cache = cache.get();
  o.filter_policy = filter.get();
  o.write_buffer_size = options.write_buffer_bytes;
  o.block_size = options.block_size;
  o.max_file_size = options.max_file_size;
  o.max_open_files = options.max_open_files;
  o.compression = options.snappy_compression ? leveldb::kSnappyCompression
                                             : leveldb::kNoCompression;
  if (options.env != nullptr) o.env = options.env;

  leveldb::DB* db = nullptr;
  leveldb::Status s = leveldb::DB::Open(o, std::string(path), &db);
  if (!s.ok()) {
    std::string msg = s.ToString();
    if (s.IsInvalidArgument() &&
        msg.find("does not match existing comparator") != std::string::npos) {
      return absl::FailedPreconditionError(absl::StrCat(
          "database at ", ToAbsl(path),
          " was created with another comparator (", msg,
          "); bigset stores need comparator ", o.comparator->Name()));
    }
    if (s.IsIOError() && msg.find("lock") != std::string::npos) {
      return absl::UnavailableError(
          absl::StrCat("database at ", ToAbsl(path),
                       " is in use by another process: ", msg));
    }
    absl::Status status = FromLevelDbStatus(s);
    return absl::Status(status.code(),
                        absl::StrCat("opening ", ToAbsl(path), ": ", msg));
  }
  std::unique_ptr<LevelDbStore> store(new LevelDbStore(db, Ownership::kOwned));
  store->comparator_ = std::move(comparator);
  store->cache_ = std::move(cache);
  store->filter_policy_ = std::move(filter);
  return store;
}

std::unique_ptr<LevelDbStore> LevelDbStore::Adopt(leveldb::DB* db,
                                                  Ownership ownership) {
  return std::unique_ptr<LevelDbStore>(new LevelDbStore(db, ownership));
}

absl::Status LevelDbStore::Write(const WriteOptions& options,
                                 const WriteBatch& batch) {
  leveldb::WriteOptions o;
  o.sync = options.sync;
  leveldb::WriteBatch native;
  WriteBatch::Reader reader(batch);
  WriteBatch::Op op;
  while (reader.Next(&op)) {
    if (op.is_put) {
      native.Put(ToSlice(op.key), ToSlice(op.value));
    } else {
      native.Delete(ToSlice(op.key));
    }
  }
  return FromLevelDbStatus(db_->Write(o, &native));
}

absl::Status LevelDbStore::Get(const ReadOptions& options, std::string_view key,
                               std::string* value) {
  return FromLevelDbStatus(db_->Get(ToLevelDb(options), ToSlice(key), value));
}

std::unique_ptr<Iterator> LevelDbStore::NewIterator(const ReadOptions& options,
                                                    KeyRange range) {
  // Only bigset ranges are iterated, and every bigset key compares the same
  // under any wrapped comparator, so the bytewise-wrapping one bounds them.
  const leveldb::Comparator* cmp =
      comparator_ ? comparator_.get() : BigsetComparator();
  return std::make_unique<LevelDbIterator>(db_->NewIterator(ToLevelDb(options)),
                                           cmp, std::move(range));
}

std::unique_ptr<const Snapshot> LevelDbStore::GetSnapshot() {
  return std::make_unique<LevelDbSnapshot>(db_, db_->GetSnapshot());
}

absl::Status LevelDbStore::CompactRange(const KeyRange& range) {
  leveldb::Slice begin = ToSlice(range.start);
  leveldb::Slice end = ToSlice(range.limit);
  db_->CompactRange(&begin, range.limit.empty() ? nullptr : &end);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> LevelDbStore::ApproximateSize(const KeyRange& range) {
  if (range.limit.empty()) {
    return absl::InvalidArgumentError("ApproximateSize needs a range limit");
  }
  leveldb::Range r(ToSlice(range.start), ToSlice(range.limit));
  uint64_t size = 0;
  db_->GetApproximateSizes(&r, 1, &size);
  return size;
}

}  // namespace bigset
