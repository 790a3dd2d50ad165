#include "test_util.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <span>

#include "leveldb/env.h"
#include "leveldb/helpers/memenv.h"

namespace bigset::testing {

std::vector<uint64_t> Seeds(int base_count) {
  if (const char* one = std::getenv("BIGSET_TEST_SEED")) {
    return {std::strtoull(one, nullptr, 10)};
  }
  const int scale = TestScale();
  const int stride = SeedStride();
  std::vector<uint64_t> seeds;
  for (int i = 0; i < base_count * scale; i += stride) {
    seeds.push_back(0x5eed0000u + static_cast<uint64_t>(i));
  }
  return seeds;
}

int SeedStride() {
  if (const char* s = std::getenv("BIGSET_TEST_SEED_STRIDE")) {
    return std::max(1, std::atoi(s));
  }
  return 1;
}

int TestScale() {
  if (const char* s = std::getenv("BIGSET_TEST_SCALE")) {
    return std::max(1, std::atoi(s));
  }
  return 1;
}

uint64_t Stat(const NodeStats& stats, std::string_view name) {
  uint64_t value = 0;
  if (!stats.Get(name, &value)) FAIL("no node counter named " << name);
  return value;
}

uint64_t Stat(const std::map<std::string, uint64_t>& stats,
              std::string_view name) {
  auto it = stats.find(std::string(name));
  if (it == stats.end()) FAIL("no node counter named " << name);
  return it->second;
}

uint64_t Uniform(Rng& rng, uint64_t lo, uint64_t hi) {
  return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
}

std::string AdversarialBytes(Rng& rng, size_t max_len) {
  static constexpr char kSpecial[] = {'\x00', '\x01', '\xff', 'a', 'b'};
  size_t len = Uniform(rng, 0, max_len);
  std::string s;
  s.reserve(len);
  for (size_t i = 0; i < len; ++i) {
    if (Uniform(rng, 0, 3) == 0) {
      s.push_back(static_cast<char>(Uniform(rng, 0, 255)));
    } else {
      s.push_back(kSpecial[Uniform(rng, 0, sizeof(kSpecial) - 1)]);
    }
  }
  return s;
}

MemStore::MemStore(size_t write_buffer_bytes)
    : env(leveldb::NewMemEnv(leveldb::Env::Default())) {
  LevelDbStoreOptions o;
  o.env = env.get();
  o.write_buffer_bytes = write_buffer_bytes;
  auto s = LevelDbStore::Open("/mem/db", o);
  REQUIRE(s.ok());
  store = std::move(*s);
}

std::function<ActorId()> SeededActorIds(uint64_t seed) {
  auto rng = std::make_shared<Rng>(seed);
  return [rng] {
    ActorId a = 0;
    while (a == 0) a = (*rng)();
    return a;
  };
}

MemStore::~MemStore() { store.reset(); }

MemReplica::MemReplica(ActorId actor) {
  ReplicaOptions o;
  o.actor_id_source = [actor] { return actor; };
  auto r = Replica::Open(mem.store.get(), o);
  REQUIRE(r.ok());
  replica = std::move(*r);
}

std::vector<ElementDots> ReadAll(Replica& replica, std::string_view set,
                                 size_t batch_size, Clock* clock) {
  SetReadOptions o;
  o.batch_size = batch_size;
  auto reader = replica.Read(set, o);
  REQUIRE(reader.ok());
  if (clock != nullptr) *clock = (*reader)->clock();
  std::vector<ElementDots> all;
  std::vector<ElementDots> chunk;
  while (true) {
    auto more = (*reader)->Next(&chunk);
    REQUIRE(more.ok());
    if (!*more) {
      REQUIRE(chunk.empty());
      break;
    }
    REQUIRE(!chunk.empty());
    REQUIRE(chunk.size() <= batch_size);
    for (auto& e : chunk) all.push_back(std::move(e));
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (i > 0) REQUIRE(all[i - 1].element < all[i].element);
    REQUIRE(!all[i].dots.empty());
    REQUIRE(std::is_sorted(all[i].dots.begin(), all[i].dots.end()));
    REQUIRE(std::adjacent_find(all[i].dots.begin(), all[i].dots.end()) ==
            all[i].dots.end());
  }
  return all;
}

Ring RendezvousRing(std::vector<NodeId> nodes, uint64_t epoch, uint32_t size,
                    int n) {
  RingOptions ro;
  ro.ring_size = size;
  ro.n = n;
  ro.epoch = epoch;
  ro.placement = Placement::kRendezvous;
  absl::StatusOr<Ring> ring = Ring::Create(std::move(nodes), ro);
  REQUIRE(ring.ok());
  return *ring;
}

void AddElement(Replica& replica, std::string_view set,
                std::string_view element) {
  UpdateOp op;
  op.element = std::string(element);
  REQUIRE(replica.Update(set, std::span(&op, 1)).ok());
}

bool HasElement(Replica& replica, std::string_view set,
                std::string_view element) {
  auto dots = replica.Contains(set, element);
  REQUIRE(dots.ok());
  return !dots->empty();
}

bool Has(const std::vector<NodeId>& list, NodeId node) {
  return std::find(list.begin(), list.end(), node) != list.end();
}

std::vector<ElementDots> ReadAllCounted(Replica& replica,
                                        std::string_view set) {
  std::vector<ElementDots> elements = ReadAll(replica, set);
  absl::StatusOr<uint64_t> count = replica.Count(set);
  REQUIRE(count.ok());
  INFO("set " << set << ": count " << *count << ", read " << elements.size());
  REQUIRE(*count == elements.size());
  return elements;
}

}  // namespace bigset::testing
