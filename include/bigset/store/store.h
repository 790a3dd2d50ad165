// Store: the ordered key/value storage bigset runs on (layer 3).
//
// A Store offers exactly what the layers above need: atomic write batches,
// point reads, ordered iteration over a key range, and snapshots. Keys are
// ordered by the bigset comparator (comparator.h). LevelDbStore
// (leveldb_store.h) is the implementation.
//
// Errors are absl::Status values: NotFound for a missing key on Get,
// DataLoss for corruption found on disk, Unavailable/Internal for I/O errors.
//
// Thread-safety: a Store is safe for concurrent use by many threads. An
// Iterator, a WriteBatch and a Snapshot handle are not; each belongs to one
// thread at a time.

#ifndef BIGSET_STORE_STORE_H_
#define BIGSET_STORE_STORE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/export.h"
#include "bigset/keys/key_range.h"

namespace bigset {

// A consistent point-in-time view of a store. Released when destroyed.
// REQUIRES: destroyed before the store that created it.
class BIGSET_EXPORT Snapshot {
 public:
  virtual ~Snapshot();
};

struct ReadOptions {
  // Read as of this snapshot (not owned); nullptr reads the latest state.
  const Snapshot* snapshot = nullptr;
  // Whether blocks read should enter the block cache. Turn off for scans
  // that should not evict the working set (hand-off, sweep, full reads).
  bool fill_cache = true;
  // Verify block checksums on every read.
  bool verify_checksums = false;
};

struct WriteOptions {
  // fsync the write-ahead log before acknowledging. Without it a machine
  // crash (not a process crash) may lose the most recent writes, never
  // part of one batch.
  bool sync = false;
};

// An ordered list of puts and deletes applied atomically by Store::Write.
//
// The batch is built directly in the representation LevelDbStore hands to
// LevelDB (docs/FORMATS.md, "Write batch"), so that a write copies nothing;
// no engine type appears here. Another Store implementation reads the
// operations with a WriteBatch::Reader or Iterate. A value type; movable,
// not copyable; a moved-from batch is empty.
//
// Thread-safety: not thread-safe. Store::Write may change the batch's
// private header (LevelDB stamps its sequence number into it), so one batch
// is not written by two threads at once, nor read while it is written.
class BIGSET_EXPORT WriteBatch {
 public:
  WriteBatch();
  ~WriteBatch();
  WriteBatch(WriteBatch&& other) noexcept;
  WriteBatch& operator=(WriteBatch&& other) noexcept;
  WriteBatch(const WriteBatch&) = delete;
  WriteBatch& operator=(const WriteBatch&) = delete;

  void Put(std::string_view key, std::string_view value);
  void Delete(std::string_view key);
  // Makes room for `bytes` of operations, so that a batch whose size is
  // known roughly grows its buffer once. Has an effect only on an empty
  // batch whose buffer is smaller; it writes `bytes` of padding once (from
  // a temporary above 4 KiB), so callers that write often keep their batch.
  void Reserve(size_t bytes);
  // Empties the batch, keeping its buffer's capacity.
  void Clear();

  // Number of puts and deletes.
  size_t Count() const { return count_; }
  // Bytes of the batch's operations (what a write logs, but for a fixed
  // header): 0 for an empty batch.
  size_t ApproximateSize() const { return size_; }
  // Bytes the batch's buffer may hold, from above (at least
  // ApproximateSize(); Reserve and Clear leave it large), for callers that
  // keep a batch between writes and bound what they keep: a string grows to
  // what it needs or twice what it had, so its buffer holds at most twice
  // the most it held.
  size_t ReservedBytes() const {
    return rep_ == nullptr ? 0 : 2 * (kNativeHeader + std::max(held_, size_));
  }

  // One operation of a batch. `value` is empty for a delete.
  struct Op {
    bool is_put = false;
    std::string_view key;
    std::string_view value;
  };

  // Reads the operations of a batch in order. The views stay valid while
  // the batch is unchanged. Not thread-safe.
  class BIGSET_EXPORT Reader {
   public:
    explicit Reader(const WriteBatch& batch);
    // Stores the next operation in *op and returns true, or returns false
    // at the end.
    bool Next(Op* op);

   private:
    std::vector<Op> ops_;
    size_t next_ = 0;
  };

  // Receives the operations of a batch in order (see Iterate).
  class Handler {
   public:
    virtual ~Handler();
    virtual void Put(std::string_view key, std::string_view value) = 0;
    virtual void Delete(std::string_view key) = 0;
  };
  // Calls `handler` for every operation in order.
  void Iterate(Handler* handler) const;

 private:
  // The engine's batch (lib/store/write_batch_rep.h); created by the first
  // operation or Reserve, null while the batch never held one.
  struct Rep;
  friend struct WriteBatchAccess;
  Rep& rep();
  // LevelDB's batch header (sequence and count).
  static constexpr size_t kNativeHeader = 12;

  std::unique_ptr<Rep> rep_;
  size_t count_ = 0;
  size_t size_ = 0;
  // The most bytes of operations the buffer held before its contents (a
  // Reserve's pad counts).
  size_t held_ = 0;
};

// Iterates the keys of one KeyRange in comparator order. Starts unpositioned:
// call SeekToFirst or Seek. key() and value() are valid until the next move.
class BIGSET_EXPORT Iterator {
 public:
  virtual ~Iterator();

  // True when positioned on a key inside the range.
  virtual bool Valid() const = 0;
  // Positions at the first key of the range.
  virtual void SeekToFirst() = 0;
  // Positions at the first key >= max(target, range.start).
  virtual void Seek(std::string_view target) = 0;
  // REQUIRES: Valid().
  virtual void Next() = 0;
  // REQUIRES: Valid().
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  // Non-OK if iteration stopped because of an error (as opposed to reaching
  // the end of the range).
  virtual absl::Status status() const = 0;
};

class BIGSET_EXPORT Store {
 public:
  virtual ~Store();

  // Applies every operation of `batch` atomically: after a crash either all
  // of them or none are visible. A failed write may still be found after a
  // restart (its record may have reached the log); a write acknowledged
  // after a failed one must not be lost, so an implementation that cannot
  // promise that refuses writes after a failure until it is reopened
  // (LevelDbStore does).
  virtual absl::Status Write(const WriteOptions& options,
                             const WriteBatch& batch) = 0;

  // Reads the value of `key` into *value. NotFound if absent.
  virtual absl::Status Get(const ReadOptions& options, std::string_view key,
                           std::string* value) = 0;

  // An iterator over `range`, as the store was when it was created (or as
  // of options.snapshot): later writes are not seen. REQUIRES: destroyed
  // before the store.
  virtual std::unique_ptr<Iterator> NewIterator(const ReadOptions& options,
                                                KeyRange range) = 0;

  // A snapshot of the current state. REQUIRES: destroyed before the store.
  virtual std::unique_ptr<const Snapshot> GetSnapshot() = 0;

  // Compacts the storage of `range` (e.g. after a sweep deleted keys).
  virtual absl::Status CompactRange(const KeyRange& range) = 0;

  // Approximate bytes on disk used by `range`.
  virtual absl::StatusOr<uint64_t> ApproximateSize(const KeyRange& range) = 0;
};

}  // namespace bigset

#endif  // BIGSET_STORE_STORE_H_
