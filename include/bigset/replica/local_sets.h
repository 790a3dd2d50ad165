// LocalSets: bigset on one machine, without replication.
//
// Owns a LevelDB store and one replica over it, and offers the plain set
// operations: Add, Remove, Clear, Contains, Members. Each add replaces the
// element's earlier dots (it reads them as its context under the set's
// lock), so an element has one key however often it is added. A clear
// writes only the set's tombstone; its keys are deleted by the sweeper
// (SweepSome, or StartSweeper for a background thread).
//
// Thread-safety: safe for concurrent use.

#ifndef BIGSET_REPLICA_LOCAL_SETS_H_
#define BIGSET_REPLICA_LOCAL_SETS_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bigset/export.h"
#include "bigset/replica/replica.h"
#include "bigset/store/leveldb_store.h"

namespace bigset {

struct LocalSetsOptions {
  LevelDbStoreOptions store;
  ReplicaOptions replica;
};

class BIGSET_EXPORT LocalSets {
 public:
  // Opens (creating if missing) the sets stored at `path`.
  static absl::StatusOr<std::unique_ptr<LocalSets>> Open(
      std::string_view path, const LocalSetsOptions& options = {});

  // Closes the replica cleanly (see Replica::Close) if Close was not called.
  ~LocalSets();

  // A clean shutdown: the next Open keeps this replica's actor id.
  absl::Status Close();

  absl::Status Add(std::string_view set, std::string_view element);
  // Removes `element` if present; a no-op otherwise.
  absl::Status Remove(std::string_view set, std::string_view element);
  // Removes every element the set holds now (an add that runs concurrently
  // may survive). Costs a write of the set's tombstone, whatever the set's
  // size; the space comes back when the set is swept.
  absl::Status Clear(std::string_view set);
  absl::StatusOr<bool> Contains(std::string_view set, std::string_view element);
  // Every element, ascending. For large sets prefer replica().Read().
  absl::StatusOr<std::vector<std::string>> Members(std::string_view set);
  absl::StatusOr<uint64_t> Count(std::string_view set);

  // Replica::SweepSome, StartSweeper and StopSweeper.
  absl::StatusOr<SweepProgress> SweepSome(uint64_t budget) {
    return replica_->SweepSome(budget);
  }
  absl::Status StartSweeper(const SweepOptions& options = {}) {
    return replica_->StartSweeper(options);
  }
  void StopSweeper() { replica_->StopSweeper(); }

  Replica& replica() { return *replica_; }
  Store& store() { return *store_; }

 private:
  LocalSets(std::unique_ptr<LevelDbStore> store,
            std::unique_ptr<Replica> replica);

  std::unique_ptr<LevelDbStore> store_;
  std::unique_ptr<Replica> replica_;  // Destroyed before store_.
};

}  // namespace bigset

#endif  // BIGSET_REPLICA_LOCAL_SETS_H_
