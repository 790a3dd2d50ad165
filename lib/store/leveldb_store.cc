#include "bigset/store/leveldb_store.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/keys/comparator.h"
#include "bigset/keys/keys.h"
#include "core/string_view_compat.h"
#include "leveldb/cache.h"
#include "leveldb/comparator.h"
#include "leveldb/env.h"
#include "leveldb/filter_policy.h"
#include "leveldb/iterator.h"
#include "leveldb/write_batch.h"
#include "store/iterator_pool.h"
#include "store/pread_env.h"
#include "store/read_only_env.h"
#include "store/write_batch_rep.h"

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

// Iterates [range.start, range.limit) of a LevelDB iterator, borrowed from
// `pool` (returned there when done) if that is not null.
class LevelDbIterator final : public Iterator {
 public:
  LevelDbIterator(std::unique_ptr<IteratorPool::Entry> entry,
                  IteratorPool* pool, const leveldb::Comparator* cmp,
                  KeyRange range)
      : entry_(std::move(entry)),
        it_(entry_->it.get()),
        pool_(pool),
        cmp_(cmp),
        range_(std::move(range)),
        bigset_limit_(IsBigsetKey(range_.limit)) {}

  ~LevelDbIterator() override {
    if (pool_ != nullptr) pool_->Return(std::move(entry_), status_ok_);
  }

  bool Valid() const override { return valid_; }

  void SeekToFirst() override {
    status_ok_ = false;
    it_->Seek(ToSlice(range_.start));
    Update();
  }

  void Seek(std::string_view target) override {
    leveldb::Slice t = ToSlice(target);
    if (cmp_->Compare(t, ToSlice(range_.start)) < 0) {
      t = ToSlice(range_.start);
    }
    status_ok_ = false;
    it_->Seek(t);
    Update();
  }

  void Next() override {
    status_ok_ = false;
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
    leveldb::Status s = it_->status();
    // Only a move changes it (each move clears the flag).
    status_ok_ = s.ok();
    return FromLevelDbStatus(s);
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

  std::unique_ptr<IteratorPool::Entry> entry_;
  leveldb::Iterator* const it_;  // entry_->it
  IteratorPool* const pool_;
  const leveldb::Comparator* cmp_;
  KeyRange range_;
  const bool bigset_limit_;
  bool valid_ = false;
  // status() read OK since the last move: the pool need not ask again.
  mutable bool status_ok_ = false;
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

absl::Status LevelDbStore::ReadOnlyError() {
  return absl::FailedPreconditionError("the store was opened read-only");
}

LevelDbStore::LevelDbStore(leveldb::DB* db, Ownership ownership)
    : db_(db), ownership_(ownership) {}

LevelDbStore::~LevelDbStore() {
  // Pooled iterators read the database: destroyed before it closes.
  iterators_.reset();
  // The database must close before the comparator, cache and filter policy
  // its options point to are destroyed (members are destroyed after this).
  if (ownership_ == Ownership::kOwned) delete db_;
}

namespace {

// The LevelDB options of `options`, with the objects they point to.
struct NativeOptions {
  leveldb::Options options;
  std::unique_ptr<leveldb::Comparator> comparator;
  std::unique_ptr<leveldb::Cache> cache;
  std::unique_ptr<const leveldb::FilterPolicy> filter;
};

absl::StatusOr<NativeOptions> ToNative(const LevelDbStoreOptions& options) {
  if (options.bloom_bits_per_key < 0) {
    return absl::InvalidArgumentError("bloom_bits_per_key must be >= 0");
  }
  NativeOptions n;
  if (options.wrapped_comparator != nullptr &&
      options.wrapped_comparator != leveldb::BytewiseComparator()) {
    n.comparator = NewBigsetComparator(options.wrapped_comparator);
  }
  n.cache.reset(leveldb::NewLRUCache(options.block_cache_bytes));
  if (options.bloom_bits_per_key > 0) {
    n.filter.reset(leveldb::NewBloomFilterPolicy(options.bloom_bits_per_key));
  }
  leveldb::Options& o = n.options;
  o.comparator = n.comparator ? n.comparator.get() : BigsetComparator();
  o.create_if_missing = options.create_if_missing && !options.read_only;
  o.error_if_exists = options.error_if_exists;
  o.paranoid_checks = options.paranoid_checks;
  o.block_cache = n.cache.get();
  o.filter_policy = n.filter.get();
  o.write_buffer_size = options.write_buffer_bytes;
  o.block_size = options.block_size;
  o.max_file_size = options.max_file_size;
  o.max_open_files = options.max_open_files;
  o.compression = options.snappy_compression ? leveldb::kSnappyCompression
                                             : leveldb::kNoCompression;
  if (options.env != nullptr) o.env = options.env;
  return n;
}

// Collects LevelDB's repair messages, one string per message.
class CollectingLogger final : public leveldb::Logger {
 public:
  void Logv(const char* format, std::va_list ap) override {
    char buf[1024];
    std::va_list copy;
    va_copy(copy, ap);
    int n = std::vsnprintf(buf, sizeof(buf), format, copy);
    va_end(copy);
    if (n < 0) return;
    std::string line(buf,
                     std::min<size_t>(static_cast<size_t>(n), sizeof(buf) - 1));
    while (!line.empty() && line.back() == '\n') line.pop_back();
    lines.push_back(std::move(line));
  }
  std::vector<std::string> lines;
};

// Adds one line of LevelDB's repair log to the report's counts.
void CountRepairLine(const std::string& line, StoreRepairReport* r) {
  unsigned long long a = 0, b = 0;
  int n = 0;
  char word[32] = {0};
  if (std::sscanf(line.c_str(), "Log #%llu: %d ops saved to Table #%llu", &a,
                  &n, &b) == 3) {
    ++r->logs;
    r->log_ops += static_cast<uint64_t>(std::max(n, 0));
  } else if (std::sscanf(line.c_str(), "Log #%llu: dropping %d bytes", &a,
                         &n) == 2) {
    r->log_bytes_dropped += static_cast<uint64_t>(std::max(n, 0));
  } else if (line.find(": ignoring ") != std::string::npos &&
             line.rfind("Log #", 0) == 0) {
    // A record whose checksum held but whose batch did not decode, or a
    // log that could not be converted: its operations are lost.
    ++r->log_records_dropped;
  } else if (std::sscanf(line.c_str(), "Table #%llu: %d entries %31s", &a, &n,
                         word) == 3) {
    if (std::string_view(word) == "repaired") return;  // Counted already.
    ++r->tables;
    r->entries += static_cast<uint64_t>(std::max(n, 0));
    if (std::string_view(word) != "OK") ++r->damaged_tables;
  } else if (std::sscanf(line.c_str(), "Table #%llu: dropped", &a) == 1 &&
             line.find(": dropped") != std::string::npos) {
    ++r->dropped_tables;
  } else if (line.find(": unparsable key") != std::string::npos) {
    ++r->unparsable_entries;
  } else if (line.rfind("Archiving ", 0) == 0) {
    size_t colon = line.rfind(": ");
    r->archived.push_back(line.substr(
        10, colon == std::string::npos ? std::string::npos : colon - 10));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<LevelDbStore>> LevelDbStore::Open(
    std::string_view path, const LevelDbStoreOptions& options) {
  absl::StatusOr<NativeOptions> native = ToNative(options);
  if (!native.ok()) return native.status();
  leveldb::Options& o = native->options;
  std::unique_ptr<leveldb::Env> own_env;
  if (options.read_only) {
    own_env = NewReadOnlyEnv(o.env);
    o.env = own_env.get();
  } else if (!options.mmap_reads && options.env == nullptr) {
    own_env = NewPreadEnv(o.env);
    o.env = own_env.get();
  }

  // LevelDB creates the directory and its lock file before it finds that
  // there is no database: check first, so a failed open leaves no trace.
  if (!o.create_if_missing &&
      !o.env->FileExists(absl::StrCat(ToAbsl(path), "/CURRENT"))) {
    return absl::NotFoundError(absl::StrCat("no database at ", ToAbsl(path)));
  }
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
    if (s.IsInvalidArgument() &&
        msg.find("does not exist") != std::string::npos) {
      return absl::NotFoundError(
          absl::StrCat("no database at ", ToAbsl(path), ": ", msg));
    }
    absl::Status status = FromLevelDbStatus(s);
    return absl::Status(status.code(),
                        absl::StrCat("opening ", ToAbsl(path), ": ", msg));
  }
  std::unique_ptr<LevelDbStore> store(new LevelDbStore(db, Ownership::kOwned));
  // Only this store writes the database: its iterators can be kept between
  // reads (store/iterator_pool.h).
  store->iterators_ = std::make_unique<IteratorPool>(kMaxIteratorUses);
  store->read_only_ = options.read_only;
  store->env_ = std::move(own_env);
  store->comparator_ = std::move(native->comparator);
  store->cache_ = std::move(native->cache);
  store->filter_policy_ = std::move(native->filter);
  return store;
}

absl::StatusOr<StoreRepairReport> LevelDbStore::Repair(
    std::string_view path, const LevelDbStoreOptions& options) {
  if (options.read_only) {
    return absl::InvalidArgumentError("a repair cannot be read-only");
  }
  absl::StatusOr<NativeOptions> native = ToNative(options);
  if (!native.ok()) return native.status();
  CollectingLogger logger;
  native->options.info_log = &logger;
  leveldb::Env* env = native->options.env;
  const std::string dir(path);
  // Repairing an empty or missing directory would create a database.
  std::vector<std::string> children;
  if (!env->GetChildren(dir, &children).ok() ||
      std::none_of(children.begin(), children.end(), [](const std::string& f) {
        return f == "CURRENT" || f.ends_with(".ldb") || f.ends_with(".log") ||
               f.starts_with("MANIFEST-");
      })) {
    return absl::NotFoundError(absl::StrCat("no database at ", dir));
  }
  // LevelDB's repair takes no lock of its own: hold the database's, so a
  // database another process has open is refused, not rewritten under it.
  leveldb::FileLock* lock = nullptr;
  const std::string lock_path = dir + "/LOCK";
  if (env->FileExists(lock_path)) {
    leveldb::Status ls = env->LockFile(lock_path, &lock);
    if (!ls.ok()) {
      return absl::UnavailableError(
          absl::StrCat("database at ", dir,
                       " is in use by another process: ", ls.ToString()));
    }
  }
  leveldb::Status s = leveldb::RepairDB(dir, native->options);
  if (lock != nullptr) env->UnlockFile(lock);
  StoreRepairReport report;
  for (const std::string& line : logger.lines) CountRepairLine(line, &report);
  report.log = std::move(logger.lines);
  if (!s.ok()) {
    std::string msg = s.ToString();
    if (s.IsIOError() && msg.find("lock") != std::string::npos) {
      return absl::UnavailableError(absl::StrCat(
          "database at ", dir, " is in use by another process: ", msg));
    }
    absl::Status status = FromLevelDbStatus(s);
    return absl::Status(status.code(),
                        absl::StrCat("repairing ", dir, ": ", msg));
  }
  return report;
}

std::unique_ptr<LevelDbStore> LevelDbStore::Adopt(leveldb::DB* db,
                                                  Ownership ownership) {
  return std::unique_ptr<LevelDbStore>(new LevelDbStore(db, ownership));
}

absl::Status LevelDbStore::Write(const WriteOptions& options,
                                 const WriteBatch& batch) {
  if (read_only_) return ReadOnlyError();
  if (write_failed_.load(std::memory_order_acquire)) return write_error();
  leveldb::WriteOptions o;
  o.sync = options.sync;
  // The batch was built as a LevelDB batch (lib/store/write_batch_rep.h):
  // it is written as it is.
  leveldb::WriteBatch* native = WriteBatchAccess::Native(batch);
  // A batch that never held an operation has no LevelDB batch; its write
  // still syncs the log if asked to.
  std::optional<leveldb::WriteBatch> empty;
  if (native == nullptr) native = &empty.emplace();
  if (iterators_ != nullptr) iterators_->WriteStarted();
  const leveldb::Status s = db_->Write(o, native);
  if (iterators_ != nullptr) iterators_->WriteDone();
  if (s.ok()) return absl::OkStatus();
  absl::Status failed = FromLevelDbStatus(s);
  {
    MutexLock lock(&error_mu_);
    if (write_error_.ok()) {
      write_error_ = absl::Status(
          failed.code(), absl::StrCat("a write failed; the store refuses "
                                      "writes until it is reopened: ",
                                      failed.message()));
    }
  }
  write_failed_.store(true, std::memory_order_release);
  return failed;
}

size_t LevelDbStore::kept_iterators() const {
  return iterators_ == nullptr ? 0 : iterators_->idle();
}

absl::Status LevelDbStore::write_error() const {
  MutexLock lock(&error_mu_);
  return write_error_;
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
  // Iterators of the latest state with default options are kept between
  // reads; creating one costs about what a point lookup's seek does.
  const bool pooled = iterators_ != nullptr && options.snapshot == nullptr &&
                      options.fill_cache && !options.verify_checksums;
  std::unique_ptr<IteratorPool::Entry> entry =
      pooled ? iterators_->Borrow() : std::make_unique<IteratorPool::Entry>();
  if (entry->it == nullptr) {
    entry->it.reset(db_->NewIterator(ToLevelDb(options)));
  }
  return std::make_unique<LevelDbIterator>(std::move(entry),
                                           pooled ? iterators_.get() : nullptr,
                                           cmp, std::move(range));
}

std::unique_ptr<const Snapshot> LevelDbStore::GetSnapshot() {
  return std::make_unique<LevelDbSnapshot>(db_, db_->GetSnapshot());
}

absl::Status LevelDbStore::CompactRange(const KeyRange& range) {
  if (read_only_) return ReadOnlyError();
  leveldb::Slice begin = ToSlice(range.start);
  leveldb::Slice end = ToSlice(range.limit);
  // A kept iterator would pin the compaction's inputs, and LevelDB deletes
  // replaced files only after a compaction: they would stay on disk (and a
  // LevelDB repair would read them back). Counted like a write, so none is
  // kept during it either.
  if (iterators_ != nullptr) {
    iterators_->WriteStarted();
    iterators_->DropIdle();
  }
  db_->CompactRange(&begin, range.limit.empty() ? nullptr : &end);
  if (iterators_ != nullptr) iterators_->WriteDone();
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
