// Shared helpers for the randomized tests. Test files are written in
// namespace bigset::testing, so these and the other support headers' names
// need no using-declarations.
//
// Every randomized test draws its seeds from Seeds(); the seed in use is
// captured with Catch2's CAPTURE so that a failure prints it. Set
// BIGSET_TEST_SCALE=K to multiply the number of seeds (long local soaks),
// BIGSET_TEST_SEED=S to rerun one seed, and BIGSET_TEST_SEED_STRIDE=K to run
// every K-th seed only (the sanitizer build, whose job is finding memory
// and undefined-behaviour errors on the paths the seeds take: it runs 5 to
// 10 times slower, and the plain build runs every seed).

#ifndef BIGSET_TESTS_TEST_UTIL_H_
#define BIGSET_TESTS_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bigset/cluster/node_stats.h"
#include "bigset/cluster/ring.h"
#include "bigset/core/element_dots.h"
#include "bigset/replica/replica.h"
#include "bigset/store/leveldb_store.h"

namespace leveldb {
class Env;
}  // namespace leveldb

namespace bigset::testing {

// The seeds a randomized test should run: `base_count` seeds scaled by
// BIGSET_TEST_SCALE (every BIGSET_TEST_SEED_STRIDE-th of them, at least
// one), or the single seed BIGSET_TEST_SEED.
std::vector<uint64_t> Seeds(int base_count);
// BIGSET_TEST_SCALE (at least 1; 1 when unset), for tests that scale their
// size rather than their seeds.
int TestScale();
// BIGSET_TEST_SEED_STRIDE (at least 1; 1 when unset), for tests that scale
// their size rather than their seeds and run in the sanitizer build too.
int SeedStride();

// Counter `name` of a node's stats; fails the test if the node has no
// counter of that name (a misspelt name must not read as 0).
uint64_t Stat(const NodeStats& stats, std::string_view name);
// The same of counters summed by name (e.g. over nodes).
uint64_t Stat(const std::map<std::string, uint64_t>& stats,
              std::string_view name);

// A second of the simulator's virtual time, in microseconds.
inline constexpr uint64_t kSecond = 1'000'000;

using Rng = std::mt19937_64;

// Random bytes of random length in [0, max_len], biased towards the bytes
// that break naive encodings (0x00, 0x01, 0xFF) and towards shared prefixes.
std::string AdversarialBytes(Rng& rng, size_t max_len);

// An actor_id_source (ReplicaOptions) drawing from an Rng seeded with
// `seed`, for tests that open replicas more than once: with the default
// (std::random_device) a replica that restarts uncleanly takes a random
// actor id, dots sort differently, and two runs of one seed differ.
// Copies of the function share one sequence, so each call gives a new id.
std::function<ActorId()> SeededActorIds(uint64_t seed);

// Uniform integer in [lo, hi].
uint64_t Uniform(Rng& rng, uint64_t lo, uint64_t hi);

// A LevelDbStore on LevelDB's in-memory Env. A small write buffer makes
// flushes and compactions happen in small tests.
struct MemStore {
  explicit MemStore(size_t write_buffer_bytes = 256 << 10);
  ~MemStore();
  std::unique_ptr<leveldb::Env> env;
  std::unique_ptr<LevelDbStore> store;
};

// A replica of actor `actor` over its own MemStore (REQUIREs that it
// opens).
struct MemReplica {
  explicit MemReplica(ActorId actor);
  MemStore mem;
  std::unique_ptr<Replica> replica;
};

// Every element of `set` on `replica`, read in chunks of `batch_size`;
// checks the stream's invariants (ascending elements, non-empty ascending
// unique dots, chunk sizes) as it goes. `clock` receives the read's clock.
std::vector<ElementDots> ReadAll(Replica& replica, std::string_view set,
                                 size_t batch_size = 1000,
                                 Clock* clock = nullptr);

// ReadAll, and REQUIREs that the replica's Count agrees with the read
// (counts are kept by every write path: docs/DESIGN.md, "Counts"). Only for
// a set no other thread writes meanwhile.
std::vector<ElementDots> ReadAllCounted(Replica& replica, std::string_view set);

// Adds `element` to `set` on `replica` (REQUIREs that it succeeds).
void AddElement(Replica& replica, std::string_view set,
                std::string_view element);
// Whether `set` on `replica` holds `element` (REQUIREs that it reads).
bool HasElement(Replica& replica, std::string_view set,
                std::string_view element);

// A ring of `nodes` with rendezvous placement (REQUIREs that it is valid).
Ring RendezvousRing(std::vector<NodeId> nodes, uint64_t epoch, uint32_t size,
                    int n);
// Whether `list` (a serving or preference list) holds `node`.
bool Has(const std::vector<NodeId>& list, NodeId node);

// Runs `body(rng)` once for each of Seeds(base_count), the seed captured
// (CAPTURE, so that a failure prints it) and `rng` seeded with it.
template <typename Body>
void ForEachSeed(int base_count, Body body) {
  for (uint64_t seed : Seeds(base_count)) {
    CAPTURE(seed);
    Rng rng(seed);
    body(rng);
  }
}

}  // namespace bigset::testing

#endif  // BIGSET_TESTS_TEST_UTIL_H_
