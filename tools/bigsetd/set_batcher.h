// SetBatcher: runs the set commands that arrive together for one set (a
// pipeline, many clients) as one quorum read and one write, the way
// LevelDB groups concurrent writers into one log write.
//
// Per batch key (a set and the read and write quorums its commands ask
// for), batches take effect one after the other. Commands submitted while
// batches run wait, and the next batch takes all of them (up to a bound on
// its distinct members): under load, batches grow by themselves; alone, a
// command runs at once. A batch:
//
//   1. reads every distinct member its commands name from a read quorum
//      (one ContainsAll), unless it holds only SADDs and the options skip
//      that read (--sadd-reply coordinator);
//   2. once every batch before it is done, runs its commands in submission
//      order against what the read found, with the writes of the batches
//      that were still running when its read began laid over it (their
//      deltas: the dots each removed go, the dot each added comes), so it
//      sees the set as those batches left it. Each reply is the one the
//      commands would get one after the other (SADD counts members absent
//      before it, SREM members present, SISMEMBER sees the SADDs and SREMs
//      before it);
//   3. writes, as one multi-op update (one delta, one batch per replica,
//      one message per peer), one op per member the batch changed: the
//      last command decides whether it is an add (whose context is what the
//      read found plus what the coordinating replica holds, so no dot piles
//      up) or a remove of what the read found;
//   4. answers every command once the write is acknowledged (W places), or
//      at once if nothing was written.
//
// Up to `max_batches` batches of a key run at once: their reads overlap
// the write before them (read-ahead); their writes go one at a time. If a
// batch before a read-ahead fails its write (it may or may not have been
// applied), the read is made again once that batch is done.
//
// Commands of different connections that share a batch are concurrent (no
// reply had been sent to either), so any order is a valid one; the batch
// takes them in the order they came. A connection's own commands take
// effect in its order: batches take effect in the order they were made,
// and a command is never in a batch made before it was submitted.
//
// If the write fails, the commands whose answer depends on it (they name a
// member the batch wrote) fail with its error: the write may or may not
// have been applied. The others keep their answers. If the read fails,
// every command of the batch fails with its error and nothing is written.
//
// Thread-safety: not thread-safe; used on one thread, which the backend's
// callbacks also run on. Callbacks may submit more commands.

#ifndef BIGSET_TOOLS_BIGSETD_SET_BATCHER_H_
#define BIGSET_TOOLS_BIGSETD_SET_BATCHER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/core/delta.h"
#include "bigset/core/update_op.h"
#include "bigset/replica/query.h"

namespace bigset::server {

// What a batch needs of the node: bigsetd's implementation posts each call
// to the node's thread and each callback back to the batcher's thread.
class BatchBackend {
 public:
  virtual ~BatchBackend() = default;
  // The dots a read quorum of `r` holds for each of `elements`, in their
  // order (Node::ContainsAll), failing after `timeout_micros`. A non-zero
  // `hedge_micros` asks R places first and the others after that long
  // (ClusterReadOptions::query_hedge_micros); 0 asks every replica at
  // once. `done` runs once, on the batcher's thread.
  virtual void ContainsAll(
      std::string set, std::vector<std::string> elements, int r,
      uint64_t timeout_micros, uint64_t hedge_micros,
      std::function<void(absl::StatusOr<Membership>)> done) = 0;
  // One update acknowledged by `w` places (Node::Update), failing after
  // `timeout_micros`.
  virtual void Update(std::string set, std::vector<UpdateOp> ops, int w,
                      uint64_t timeout_micros,
                      std::function<void(absl::StatusOr<Delta>)> done) = 0;
};

// One command of a batch.
struct SetCommand {
  enum class Kind {
    kAdd,       // SADD: `members` distinct; answers how many were absent.
    kRemove,    // SREM: `members` distinct; answers how many were present.
    kIsMember,  // SISMEMBER, SMISMEMBER: `members` as given (repeats too).
  };
  Kind kind = Kind::kAdd;
  std::vector<std::string> members;
};

struct SetCommandResult {
  // Not OK: the command failed; `write_failed` says whether its write did
  // (it may or may not have been applied) or the read before it.
  absl::Status status;
  bool write_failed = false;
  int64_t count = 0;          // kAdd, kRemove.
  std::vector<bool> present;  // kIsMember, per member.
};

struct SetBatcherOptions {
  // SADD-only batches skip the read: the coordinating replica's own dots
  // are the add's context and decide the count (--sadd-reply coordinator).
  bool read_before_add = true;
  // A batch stops taking commands once it names this many members, or
  // this many bytes of them (a command larger than this runs alone).
  size_t max_batch_members = 4096;
  size_t max_batch_bytes = 4 << 20;
  // Batches of one key running at once (reading ahead of the write before
  // them). >= 1.
  size_t max_batches = 4;
  // An SADD batch may send its adds with its read, when the read reaches
  // every replica before the adds (false with hedged reads, which ask some
  // replicas later) and the batch is small (a large one would put both on
  // a peer's queue at once, and waits for its throughput, not a round
  // trip).
  bool read_with_write = true;
  size_t read_with_write_max_bytes = 1 << 20;
  // The read of a batch that only asks (SISMEMBER, SMISMEMBER) and names
  // at least `bulk_read_members` members asks R places first and the
  // others after `bulk_read_hedge_micros` (0: every replica at once, as
  // other reads). Under load the third replica's answer is work that
  // decides nothing (about a fifth of the cluster's CPU per SISMEMBER);
  // a single command keeps asking all, to wait for the fastest two.
  uint64_t bulk_read_hedge_micros = 0;
  size_t bulk_read_members = 32;
  // Each read and write fails after this long; a command ends within
  // twice this of its arrival: a batch that has not written by then (it
  // waited for the writes before it) fails without writing. 0: no bound.
  uint64_t timeout_micros = 2'000'000;
  // The clock of those deadlines (steady, in microseconds); empty: the
  // process's steady clock.
  std::function<uint64_t()> now;
};

// Counters of the batcher (all since it was made).
struct SetBatcherStats {
  uint64_t batches = 0;
  uint64_t commands = 0;
  uint64_t reads = 0;
  uint64_t bulk_reads = 0;  // Of them, hedged (bulk_read_hedge_micros).
  uint64_t writes = 0;
  uint64_t largest_batch = 0;  // In commands.
  // Reads made again because a batch before them failed its write.
  uint64_t reads_repeated = 0;
  // Batches whose write went with their read (no SREM, and the read not
  // back when the batch could write).
  uint64_t reads_with_write = 0;
  // Batches that failed without writing: their deadline passed while the
  // writes before them waited.
  uint64_t expired = 0;
  uint64_t waiting = 0;  // Commands queued now behind a running batch.
};

class SetBatcher {
 public:
  using Done = std::function<void(SetCommandResult)>;

  // REQUIRES: `backend` outlives the batcher.
  SetBatcher(BatchBackend* backend, const SetBatcherOptions& options);
  ~SetBatcher();
  SetBatcher(const SetBatcher&) = delete;
  SetBatcher& operator=(const SetBatcher&) = delete;

  // Runs `command` on `set` with quorums `r` and `w` after every command
  // submitted before it for the same set and quorums; `done` gets its
  // result, once (possibly within this call, from a backend that answers
  // at once).
  void Submit(std::string set, int r, int w, SetCommand command, Done done);

  SetBatcherStats stats() const;

 private:
  struct Pending {
    SetCommand command;
    Done done;
    uint64_t arrived = 0;  // Now(), at Submit.
  };
  struct Key {
    std::string set;
    int r;
    int w;
    friend bool operator==(const Key& a, const Key& b) {
      return a.r == b.r && a.w == b.w && a.set == b.set;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.set, k.r, k.w);
    }
  };
  struct Batch;
  struct Queue {
    std::deque<Pending> waiting;
    // Running batches, in the order they take effect.
    std::deque<std::shared_ptr<Batch>> batches;
  };

  // Makes batches of `key`'s waiting commands while fewer than
  // max_batches run.
  void MaybeStart(const Key& key);
  void Read(const std::shared_ptr<Batch>& batch);
  // Moves the batches at the head of `key`'s queue on: plans the first if
  // its read is in and writes it, or finishes it if it writes nothing.
  void Advance(const Key& key);
  // Runs the batch's commands against its read and the writes laid over
  // it, and (a batch that reads first) makes its ops; false if it must
  // read again first.
  bool Plan(Batch& batch);
  // The ops of a batch that writes without waiting for its read: an add
  // of each member SADD names, with the coordinating replica's dots as
  // its context.
  void AddEveryNamedMember(Batch& batch);
  // Marks the SADDs and SREMs that name a member the batch writes as
  // answering with the write's error if it fails.
  void DependOnWrite(Batch& batch);
  void Write(const std::shared_ptr<Batch>& batch);
  uint64_t Now() const;
  // The time a read or write of `batch` may take from now: the options'
  // timeout, within the batch's deadline; 0 if that has passed.
  uint64_t TimeLeft(const Batch& batch) const;
  // Fails every command of `batch` (deadline passed, nothing written) and
  // finishes it.
  void Expire(const std::shared_ptr<Batch>& batch);
  // Answers the batch's commands and takes it off its queue.
  void Finish(const std::shared_ptr<Batch>& batch);

  BatchBackend* const backend_;
  const SetBatcherOptions options_;
  absl::flat_hash_map<Key, Queue> queues_;
  SetBatcherStats stats_;
  // Callbacks hold this: a batcher destroyed first leaves them inert.
  std::shared_ptr<bool> alive_;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_SET_BATCHER_H_
