#include "bench_util.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <thread>

#include "core/coding.h"
#include "leveldb/write_batch.h"

namespace bigset::bench {

namespace {

std::filesystem::path BenchBase() {
  const char* base = std::getenv("BIGSET_BENCH_DIR");
  return base != nullptr ? std::filesystem::path(base)
                         : std::filesystem::temp_directory_path();
}

std::string ProcessPrefix() {
  return "bigset_bench_" + std::to_string(::getpid()) + "_";
}

}  // namespace

BenchDir::BenchDir() {
  static std::atomic<int> counter{0};
  path_ = BenchBase() / (ProcessPrefix() + std::to_string(counter++));
  std::filesystem::remove_all(path_);
}

void RemoveProcessDirs() {
  const std::string prefix = ProcessPrefix();
  for (int attempt = 0; attempt < 5; ++attempt) {
    bool left = false;
    std::error_code ec;
    for (const auto& entry :
         std::filesystem::directory_iterator(BenchBase(), ec)) {
      if (entry.path().filename().string().rfind(prefix, 0) != 0) continue;
      std::error_code rm;
      std::filesystem::remove_all(entry.path(), rm);
      left = left || rm;
    }
    if (!left) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

BenchDir::~BenchDir() { std::filesystem::remove_all(path_); }

std::string RandomElement(Rng& rng) {
  std::string e(16, '\0');
  uint64_t a = rng(), b = rng();
  std::memcpy(e.data(), &a, 8);
  std::memcpy(e.data() + 8, &b, 8);
  return e;
}

uint64_t NextRunSeed() {
  static std::atomic<uint64_t> runs{0};
  return 0x1000 + runs.fetch_add(1);
}

uint64_t Counter(const NodeStats& stats, std::string_view name) {
  uint64_t value = 0;
  if (!stats.Get(name, &value)) {
    std::fprintf(stderr, "no node counter named %.*s\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  return value;
}

uint64_t AnonResidentBytes() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "RssAnon: %llu kB", &kb) == 1) break;
  }
  std::fclose(f);
  return kb * 1024;
}

void Check(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "benchmark failed: %s\n",
                 std::string(s.ToString()).c_str());
    std::abort();
  }
}

void Check(const leveldb::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "benchmark failed: %s\n", s.ToString().c_str());
    std::abort();
  }
}

std::unique_ptr<BigsetDb> OpenBigset(const ReplicaOptions& options) {
  auto db = std::make_unique<BigsetDb>();
  auto store = LevelDbStore::Open(db->dir.str(), LevelDbStoreOptions());
  Check(store.status());
  db->store = std::move(*store);
  auto replica = Replica::Open(db->store.get(), options);
  Check(replica.status());
  db->replica = std::move(*replica);
  return db;
}

std::unique_ptr<BigsetDb> MakeBigset(uint64_t n, bool keep_elements) {
  auto db = OpenBigset();
  Rng rng(n);
  std::vector<UpdateOp> ops;
  for (uint64_t i = 0; i < n; ++i) {
    ops.push_back(UpdateOp::Add(RandomElement(rng)));
    if (keep_elements) db->elements.push_back(ops.back().element);
    if (ops.size() == 1000 || i + 1 == n) {
      Check(db->replica->Update(kSet, ops).status());
      ops.clear();
    }
  }
  return db;
}

std::unique_ptr<RawDb> OpenRaw() {
  auto raw = std::make_unique<RawDb>();
  LevelDbStoreOptions defaults;
  raw->cache.reset(leveldb::NewLRUCache(defaults.block_cache_bytes));
  raw->filter.reset(leveldb::NewBloomFilterPolicy(defaults.bloom_bits_per_key));
  leveldb::Options o;
  o.create_if_missing = true;
  o.block_cache = raw->cache.get();
  o.filter_policy = raw->filter.get();
  o.write_buffer_size = defaults.write_buffer_bytes;
  o.block_size = defaults.block_size;
  o.max_file_size = defaults.max_file_size;
  o.max_open_files = defaults.max_open_files;
  leveldb::DB* db = nullptr;
  Check(leveldb::DB::Open(o, raw->dir.str(), &db));
  raw->db.reset(db);
  return raw;
}

std::string RawSetPrefix() { return std::string("e/") + kSet + "/"; }

std::string RawElementKey(const std::string& element, uint64_t counter) {
  std::string k = RawSetPrefix();
  k += element;
  coding::PutFixed64BE(&k, 0x1234567890abcdefull);
  coding::PutFixed64BE(&k, counter);
  return k;
}

const std::string& RawClockKey() {
  static const std::string* k = new std::string(std::string("c/") + kSet);
  return *k;
}

std::unique_ptr<RawDb> MakeRaw(uint64_t n, bool keep_keys) {
  auto raw = OpenRaw();
  Rng rng(n);
  leveldb::WriteBatch batch;
  for (uint64_t i = 0; i < n; ++i) {
    std::string key = RawElementKey(RandomElement(rng), ++raw->counter);
    batch.Put(key, "");
    if (keep_keys) raw->keys.push_back(key);
    if ((i + 1) % 1000 == 0 || i + 1 == n) {
      batch.Put(RawClockKey(), std::string(12, 'c'));
      Check(raw->db->Write(leveldb::WriteOptions(), &batch));
      batch.Clear();
    }
  }
  return raw;
}

}  // namespace bigset::bench
