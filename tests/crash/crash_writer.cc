// crash_writer DIR SEED ROUND SYNC: runs the crash workload (updates, clears
// and bounded sweeps) on the replica stored in DIR until killed, writing each
// acknowledged delta to stdout as [u32 length, little-endian][encoded delta].
// Exits 3 on any error.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bigset/replica/replica.h"
#include "bigset/store/leveldb_store.h"
#include "crash_workload.h"

namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "crash_writer: %s\n", what.c_str());
  std::_Exit(3);
}

void WriteAll(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n =
        ::write(STDOUT_FILENO, bytes.data() + done, bytes.size() - done);
    if (n <= 0) Die("write to pipe failed");
    done += static_cast<size_t>(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) Die("usage: crash_writer DIR SEED ROUND SYNC");
  const std::string dir = argv[1];
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  const int round = std::atoi(argv[3]);
  const bool sync = std::atoi(argv[4]) != 0;

  bigset::LevelDbStoreOptions so;
  so.write_buffer_bytes = 64 << 10;  // Flushes and compactions mid-run.
  auto store = bigset::LevelDbStore::Open(dir, so);
  if (!store.ok()) Die(std::string(store.status().ToString()));
  bigset::ReplicaOptions ro;
  ro.sync_writes = sync;
  auto replica = bigset::Replica::Open(store->get(), ro);
  if (!replica.ok()) Die(std::string(replica.status().ToString()));

  // The current value, as recovered.
  bigset::testing::CrashValues values;
  for (const std::string& set : bigset::testing::CrashSets()) {
    auto reader = (*replica)->Read(set);
    if (!reader.ok()) Die(std::string(reader.status().ToString()));
    std::vector<bigset::ElementDots> chunk;
    while (true) {
      auto more = (*reader)->Next(&chunk);
      if (!more.ok()) Die(std::string(more.status().ToString()));
      if (!*more) break;
      for (auto& e : chunk) {
        values[set][e.element].insert(e.dots.begin(), e.dots.end());
      }
    }
  }

  for (int i = 0; i < 1000000; ++i) {
    if (auto cloud = bigset::testing::NextCloudDelta(seed, round, i)) {
      absl::Status s = (*replica)->Apply(*cloud);
      if (!s.ok()) Die(std::string(s.ToString()));
    }
    if (uint64_t budget = bigset::testing::CrashSweepBudget(seed, round, i)) {
      auto swept = (*replica)->SweepSome(budget);
      if (!swept.ok()) Die(std::string(swept.status().ToString()));
    }
    auto u = bigset::testing::NextCrashUpdate(seed, round, i, values);
    absl::StatusOr<bigset::Delta> delta;
    if (u.clear) {
      auto clock = (*replica)->GetClock(u.set);
      if (!clock.ok()) Die(std::string(clock.status().ToString()));
      delta = (*replica)->Clear(u.set, *clock);
    } else {
      delta = (*replica)->Update(u.set, u.ops);
    }
    if (!delta.ok()) Die(std::string(delta.status().ToString()));
    bigset::testing::ApplyToValues(*delta, &values);
    std::string encoded = delta->Encode();
    std::string msg;
    uint32_t len = static_cast<uint32_t>(encoded.size());
    msg.append(reinterpret_cast<const char*>(&len), 4);
    msg.append(encoded);
    WriteAll(msg);
  }
  return 0;
}
