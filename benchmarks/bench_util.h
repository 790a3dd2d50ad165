// Helpers shared by the benchmarks: databases on disk under
// $BIGSET_BENCH_DIR (default: the system temp directory), removed when the
// benchmark is done; a bigset replica and a raw LevelDB tuned alike; random
// 16-byte elements. A failed call aborts the benchmark with its status.

#ifndef BIGSET_BENCHMARKS_BENCH_UTIL_H_
#define BIGSET_BENCHMARKS_BENCH_UTIL_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "bigset/cluster/node_stats.h"
#include "bigset/replica/replica.h"
#include "bigset/store/leveldb_store.h"
#include "leveldb/cache.h"
#include "leveldb/db.h"
#include "leveldb/filter_policy.h"

namespace bigset::bench {

using Rng = std::mt19937_64;

inline constexpr char kSet[] = "benchmark-set";

// A fresh, empty database directory, removed with the object.
class BenchDir {
 public:
  BenchDir();
  ~BenchDir();
  BenchDir(const BenchDir&) = delete;
  BenchDir& operator=(const BenchDir&) = delete;

  std::string str() const { return path_.string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Removes every BenchDir this process made, including those of databases
// kept until exit. Called once the benchmarks are done; LevelDB's
// background threads may still write, so a file that appears meanwhile
// makes it try again (a few times) rather than fail.
void RemoveProcessDirs();

std::string RandomElement(Rng& rng);

// A seed no earlier call in this process returned: for a benchmark whose
// database outlives its runs (Google Benchmark runs each several times,
// with growing iteration counts), so that every run adds elements nobody
// added before. (state.iterations() is 0 before the loop: seeding with it
// made each run re-add the elements of the run before, an add that seeks.)
uint64_t NextRunSeed();

// Aborts, printing the status, unless it is OK.
void Check(const absl::Status& s);

// Anonymous resident memory of this process (heap, stacks), in bytes (0 if
// unknown). File-backed pages are left out: they are the kernel's page
// cache, counted against the process only while mapped.
uint64_t AnonResidentBytes();
void Check(const leveldb::Status& s);
// A node counter by name; aborts for a name the node does not have.
uint64_t Counter(const NodeStats& stats, std::string_view name);

// ---- bigset: one replica on disk, default options.

struct BigsetDb {
  BenchDir dir;
  std::unique_ptr<LevelDbStore> store;
  std::unique_ptr<Replica> replica;
  std::vector<std::string> elements;  // Kept only when asked for.
};

// `options.keyspace` and the rest as given (defaults: a plain replica).
std::unique_ptr<BigsetDb> OpenBigset(const ReplicaOptions& options = {});
// Opens a replica and adds `n` random elements (seeded by `n`) to kSet, in
// updates of 1,000.
std::unique_ptr<BigsetDb> MakeBigset(uint64_t n, bool keep_elements);

// ---- raw LevelDB: the same physical work with no bigset logic, tuned as
// LevelDbStoreOptions' defaults, bytewise comparator.

struct RawDb {
  BenchDir dir;
  std::unique_ptr<leveldb::Cache> cache;
  std::unique_ptr<const leveldb::FilterPolicy> filter;
  std::unique_ptr<leveldb::DB> db;
  uint64_t counter = 0;
  std::vector<std::string> keys;  // Kept only when asked for.
};

std::unique_ptr<RawDb> OpenRaw();
// An element key as bigset lays it out (set, element, actor, counter), in a
// plain bytewise namespace; every key of kSet starts with RawSetPrefix().
std::string RawElementKey(const std::string& element, uint64_t counter);
std::string RawSetPrefix();
const std::string& RawClockKey();
// Opens a raw database and puts `n` random element keys (the elements of
// MakeBigset(n)) in batches of 1,000, each with a "clock" put.
std::unique_ptr<RawDb> MakeRaw(uint64_t n, bool keep_keys);

}  // namespace bigset::bench

#endif  // BIGSET_BENCHMARKS_BENCH_UTIL_H_
