// LevelDbStore: the Store implementation over LevelDB.
//
// Either opens (creating if missing) a database at a path with the bigset
// comparator and tuned options, or adopts an embedder's already open
// leveldb::DB so that bigset data lives beside the embedder's own keys.
// Passing an Env (e.g. leveldb::NewMemEnv) runs the same code in memory.
//
// Thread-safety: safe for concurrent use (LevelDB serialises writers).

#ifndef BIGSET_STORE_LEVELDB_STORE_H_
#define BIGSET_STORE_LEVELDB_STORE_H_

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "bigset/core/mutex.h"
#include "bigset/export.h"
#include "bigset/store/store.h"
#include "leveldb/db.h"
#include "leveldb/status.h"

namespace leveldb {
class Cache;
class Comparator;
class Env;
class FilterPolicy;
}  // namespace leveldb

namespace bigset {

class IteratorPool;

struct LevelDbStoreOptions {
  bool create_if_missing = true;
  bool error_if_exists = false;
  // Open without changing any file on disk: what LevelDB writes while open
  // (the replay of its log, compactions) stays in memory, and Write and
  // CompactRange fail with FailedPrecondition. Takes a shared lock, so it
  // fails with Unavailable while a process holds the database for writing
  // (and keeps writers out while open). Not for a database that this same
  // process has open for writing (locks do not conflict within a process).
  // Implies !create_if_missing.
  bool read_only = false;
  // Check every block read from disk and stop on the first corruption.
  bool paranoid_checks = true;
  // LRU cache of uncompressed blocks.
  size_t block_cache_bytes = 64 << 20;
  // Bloom filter bits per key (0 disables). Correct under the bigset
  // comparator, whose equal keys are byte-equal.
  int bloom_bits_per_key = 10;
  // Memtable size. LevelDB's own default: an insert's cost is mostly the
  // cache misses of its memtable skiplist search, which grow with the
  // memtable. Measured with random 16-byte elements (docs/BENCHMARKS.md),
  // 4 MiB inserts about 1.4x faster than 32 MiB; raise it only to absorb
  // long bursts between compactions.
  size_t write_buffer_bytes = 4 << 20;
  // Uncompressed bytes per data block.
  size_t block_size = 4096;
  // SSTable file size.
  size_t max_file_size = 8 << 20;
  int max_open_files = 1000;
  bool snappy_compression = true;
  // Read table files through memory maps (LevelDB's own choice on 64-bit
  // systems) or with pread. Mapped pages a read or a compaction touched
  // count in the process's resident memory, which then grows with the data
  // on disk; with pread it stays what the caches above hold (a block-cache
  // miss costs a system call instead). Ignored with `env` or `read_only`.
  bool mmap_reads = true;
  // Not owned; nullptr means leveldb::Env::Default(). REQUIRES: outlives the
  // store.
  leveldb::Env* env = nullptr;
  // Orders the embedder's non-bigset keys; nullptr means bytewise. Not owned.
  // REQUIRES: outlives the store.
  const leveldb::Comparator* wrapped_comparator = nullptr;
};

// What LevelDbStore::Repair did, from LevelDB's own account of it.
struct StoreRepairReport {
  uint64_t logs = 0;               // write-ahead logs replayed into tables
  uint64_t log_ops = 0;            // operations saved from them
  uint64_t log_bytes_dropped = 0;  // corrupt log bytes skipped
  // Log records (or whole logs) LevelDB could not apply and ignored.
  uint64_t log_records_dropped = 0;
  uint64_t tables = 0;   // table files scanned
  uint64_t entries = 0;  // entries kept (readable) in them
  // Tables with unreadable blocks: their readable entries were kept, the
  // entries of the damaged blocks are lost (LevelDB cannot count them).
  uint64_t damaged_tables = 0;
  uint64_t dropped_tables = 0;      // tables that could not be read at all
  uint64_t unparsable_entries = 0;  // entries skipped for a malformed key
  // Files moved to PATH/lost/ (damaged tables, logs, old manifests).
  std::vector<std::string> archived;
  // LevelDB's repair log, one line per message.
  std::vector<std::string> log;

  // True if some data was (or may have been) lost.
  bool lost_data() const {
    return log_bytes_dropped > 0 || log_records_dropped > 0 ||
           damaged_tables > 0 || dropped_tables > 0 || unparsable_entries > 0;
  }
};

// Whether an adopted database is closed with the store.
enum class Ownership { kBorrowed, kOwned };

class BIGSET_EXPORT LevelDbStore final : public Store {
 public:
  // Opens the database at `path`. Fails with FailedPrecondition if it was
  // created with another comparator, InvalidArgument for bad options,
  // DataLoss on corruption, Unavailable if it is locked by another process.
  static absl::StatusOr<std::unique_ptr<LevelDbStore>> Open(
      std::string_view path, const LevelDbStoreOptions& options);

  // Runs LevelDB's repair on the database at `path` (which must not be
  // open; Unavailable if another process holds it): salvages every
  // readable entry of its tables and logs into new
  // tables and writes a new manifest; damaged files are moved to
  // PATH/lost/. Use it when Open fails with DataLoss. What the bigset data
  // lost is found afterwards by Replica::Repair.
  static absl::StatusOr<StoreRepairReport> Repair(
      std::string_view path, const LevelDbStoreOptions& options);

  // Wraps an open database. REQUIRES: `db` was opened with
  // BigsetComparator() (or NewBigsetComparator of its wrapped comparator),
  // and outlives the store if `ownership` is kBorrowed.
  static std::unique_ptr<LevelDbStore> Adopt(leveldb::DB* db,
                                             Ownership ownership);

  ~LevelDbStore() override;

  // After a write fails, every later Write returns that failure (with the
  // same code) until the store is closed and reopened, as LevelDB does
  // after a failed sync: a failed append may have left part of a record in
  // the log, and a write logged after it could be dropped with that
  // record's block at recovery although it was acknowledged. Reads go on.
  absl::Status Write(const WriteOptions& options,
                     const WriteBatch& batch) override;
  absl::Status Get(const ReadOptions& options, std::string_view key,
                   std::string* value) override;
  std::unique_ptr<Iterator> NewIterator(const ReadOptions& options,
                                        KeyRange range) override;
  std::unique_ptr<const Snapshot> GetSnapshot() override;
  absl::Status CompactRange(const KeyRange& range) override;
  absl::StatusOr<uint64_t> ApproximateSize(const KeyRange& range) override;

  bool read_only() const { return read_only_; }
  // The failure that made this store refuse writes (see Write), or OK.
  absl::Status write_error() const;
  // Idle iterators kept for the next reads (NewIterator lends them while no
  // write intervenes; a write drops them). For tests and monitoring.
  size_t kept_iterators() const;
  // The underlying database, for embedders that share it. REQUIRES: bigset
  // keys are written only through Write (iterators of an opened store are
  // kept between reads and see only writes it counted).
  leveldb::DB* db() const { return db_; }

 private:
  LevelDbStore(leveldb::DB* db, Ownership ownership);
  static absl::Status ReadOnlyError();

  // Opened read-only (see LevelDbStoreOptions::read_only).
  bool read_only_ = false;
  // The read-only overlay Env; destroyed after db_ (see the destructor).
  std::unique_ptr<leveldb::Env> env_;  // read_only, or !mmap_reads.
  leveldb::DB* db_;
  Ownership ownership_;
  // Objects the options of an opened database point to; they must outlive
  // db_ (destroyed after it, see the destructor).
  std::unique_ptr<leveldb::Comparator> comparator_;
  std::unique_ptr<leveldb::Cache> cache_;
  std::unique_ptr<const leveldb::FilterPolicy> filter_policy_;
  // Iterators kept between reads (lib/store/iterator_pool.h); null for an
  // adopted database, which others may write to.
  static constexpr uint32_t kMaxIteratorUses = 1 << 14;
  std::unique_ptr<IteratorPool> iterators_;
  // Set once, by the first failed write; read without the lock on every
  // write, so that a healthy store pays one load for it.
  std::atomic<bool> write_failed_{false};
  mutable Mutex error_mu_;
  absl::Status write_error_ ABSL_GUARDED_BY(error_mu_);
};

// Converts a LevelDB status to an absl::Status with the same meaning.
BIGSET_EXPORT absl::Status FromLevelDbStatus(const leveldb::Status& s);

}  // namespace bigset

#endif  // BIGSET_STORE_LEVELDB_STORE_H_
