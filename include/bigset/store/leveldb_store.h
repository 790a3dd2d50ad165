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

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
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

struct LevelDbStoreOptions {
  bool create_if_missing = true;
  bool error_if_exists = false;
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
  // Not owned; nullptr means leveldb::Env::Default(). REQUIRES: outlives the
  // store.
  leveldb::Env* env = nullptr;
  // Orders the embedder's non-bigset keys; nullptr means bytewise. Not owned.
  // REQUIRES: outlives the store.
  const leveldb::Comparator* wrapped_comparator = nullptr;
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

  // Wraps an open database. REQUIRES: `db` was opened with
  // BigsetComparator() (or NewBigsetComparator of its wrapped comparator),
  // and outlives the store if `ownership` is kBorrowed.
  static std::unique_ptr<LevelDbStore> Adopt(leveldb::DB* db,
                                             Ownership ownership);

  ~LevelDbStore() override;

  absl::Status Write(const WriteOptions& options,
                     const WriteBatch& batch) override;
  absl::Status Get(const ReadOptions& options, std::string_view key,
                   std::string* value) override;
  std::unique_ptr<Iterator> NewIterator(const ReadOptions& options,
                                        KeyRange range) override;
  std::unique_ptr<const Snapshot> GetSnapshot() override;
  absl::Status CompactRange(const KeyRange& range) override;
  absl::StatusOr<uint64_t> ApproximateSize(const KeyRange& range) override;

  // The underlying database, for embedders that share it.
  leveldb::DB* db() const { return db_; }

 private:
  LevelDbStore(leveldb::DB* db, Ownership ownership);

  leveldb::DB* db_;
  Ownership ownership_;
  // Objects the options of an opened database point to; they must outlive
  // db_ (destroyed after it, see the destructor).
  std::unique_ptr<leveldb::Comparator> comparator_;
  std::unique_ptr<leveldb::Cache> cache_;
  std::unique_ptr<const leveldb::FilterPolicy> filter_policy_;
};

// Converts a LevelDB status to an absl::Status with the same meaning.
BIGSET_EXPORT absl::Status FromLevelDbStatus(const leveldb::Status& s);

}  // namespace bigset

#endif  // BIGSET_STORE_LEVELDB_STORE_H_
