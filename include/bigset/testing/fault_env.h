// FaultEnv: a LevelDB Env that can lose what was not synced, as a machine
// does when it loses power.
//
// It wraps another Env (LevelDB's in-memory Env, or the real one) and tracks,
// per file written through it, how much of it was synced. DropUnsynced
// truncates every tracked file under a path prefix to its synced size and
// deletes the files that were never synced, which is what a power loss
// leaves behind (LevelDB's own fault-injection test environment works the
// same way). Files that existed before the FaultEnv saw them are taken as
// synced. Renames and removals are durable at once (LevelDB syncs a file
// before it renames it).
//
// Thread-safety: safe for concurrent use, as an Env must be. REQUIRES: no
// database has files open under `prefix` during DropUnsynced (close it
// first, as the machine is off).

#ifndef BIGSET_TESTING_FAULT_ENV_H_
#define BIGSET_TESTING_FAULT_ENV_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/core/mutex.h"
#include "bigset/export.h"
#include "leveldb/env.h"

namespace bigset {

class BIGSET_EXPORT FaultEnv final : public leveldb::EnvWrapper {
 public:
  // REQUIRES: `base` outlives this Env.
  explicit FaultEnv(leveldb::Env* base);
  ~FaultEnv() override;

  leveldb::Status NewWritableFile(const std::string& fname,
                                  leveldb::WritableFile** result) override;
  leveldb::Status NewAppendableFile(const std::string& fname,
                                    leveldb::WritableFile** result) override;
  leveldb::Status RemoveFile(const std::string& fname) override;
  leveldb::Status RenameFile(const std::string& src,
                             const std::string& target) override;

  // Loses every unsynced byte of the files under `prefix`. Returns the
  // number of bytes dropped (whole unsynced files included).
  absl::StatusOr<uint64_t> DropUnsynced(const std::string& prefix);

  // Makes everything written so far durable, as the kernel's periodic
  // writeback of dirty pages does: a power loss then loses only what was
  // written after the last writeback (or sync).
  void WriteBack();

  // Fills the disk of the files under `prefix`: once `bytes` more bytes
  // have been appended to them, appends there write what still fits and
  // fail with an I/O error, as write(2) does on a full disk (so a log
  // record may be left in part). FreeSpace lifts the limit of `prefix`.
  void FillDiskAfter(const std::string& prefix, uint64_t bytes);
  void FreeSpace(const std::string& prefix);

  // Syncs of write logs so far (one per synced write batch, as LevelDB
  // syncs its log for WriteOptions::sync), of every store on this Env.
  uint64_t LogSyncs() const {
    return log_syncs_.load(std::memory_order_relaxed);
  }

 private:
  class File;
  struct State {
    uint64_t size = 0;
    uint64_t synced = 0;
    bool ever_synced = false;
  };
  // How many of `want` bytes an append to `fname` may write.
  uint64_t Room(const std::string& fname, uint64_t want);
  // An open file updates its own state (shared with files_, where a rename
  // moves it): no lookup by name per append.
  void Appended(State* state, uint64_t bytes);
  void Synced(State* state);

  Mutex mu_;
  std::map<std::string, std::shared_ptr<State>> files_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> log_syncs_{0};
  // Per prefix of a disk that fills: the bytes that still fit.
  std::map<std::string, uint64_t> room_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bigset

#endif  // BIGSET_TESTING_FAULT_ENV_H_
