// bigset_store_demo: writes a few sets through the store the way a replica does
// (one atomic batch per insert: the updated set-clock and one element key),
// then walks the replica's keyspace and prints every key decoded.
//
// Usage: bigset_store_demo [database directory]   (default: a fresh temp dir)

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bigset/core/clock.h"
#include "bigset/keys/keys.h"
#include "bigset/store/leveldb_store.h"

namespace {

constexpr bigset::KeyspaceId kKeyspace = 1;
constexpr bigset::ActorId kActor = 0xa11ce;

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "error: %s\n", std::string(s.ToString()).c_str());
  return 1;
}

// Inserts `element` into `set`: increments the set-clock and writes the new
// clock and the element key in one batch, so a crash leaves both or neither.
absl::Status Insert(bigset::Store& store,
                    std::map<std::string, bigset::Clock>& clocks,
                    const std::string& set, std::string_view element) {
  bigset::Clock& clock = clocks[set];
  absl::StatusOr<bigset::Dot> dot = clock.Increment(kActor);
  if (!dot.ok()) return dot.status();
  std::string clock_value;
  clock.EncodeTo(&clock_value);
  bigset::WriteBatch batch;
  batch.Put(bigset::SetClockKey(kKeyspace, set, kActor), clock_value);
  batch.Put(bigset::ElementKey(kKeyspace, set, element, *dot), "");
  return store.Write(bigset::WriteOptions(), batch);
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path dir =
      argc > 1 ? std::filesystem::path(argv[1])
               : std::filesystem::temp_directory_path() / "bigset_demo";
  if (argc <= 1) std::filesystem::remove_all(dir);

  auto store = bigset::LevelDbStore::Open(dir.string(), {});
  if (!store.ok()) return Fail(store.status());
  std::printf("opened %s\n\n", dir.string().c_str());

  std::map<std::string, bigset::Clock> clocks;
  const std::vector<std::pair<std::string, std::string>> inserts = {
      {"fruits", "pear"},  {"fruits", "apple"},
      {"colors", "red"},   {"fruits", "banana"},
      {"colors", "green"}, {"colors", std::string("nul\0byte", 8)},
      {"fruits", "apple"},  // A second insert: a second dot, a second key.
  };
  for (const auto& [set, element] : inserts) {
    absl::Status s = Insert(**store, clocks, set, element);
    if (!s.ok()) return Fail(s);
  }
  // An end-of-set key closes each set's range.
  bigset::WriteBatch ends;
  for (const auto& [set, clock] : clocks) {
    ends.Put(bigset::EndOfSetKey(kKeyspace, set), "");
  }
  if (absl::Status s = (*store)->Write(bigset::WriteOptions(), ends); !s.ok()) {
    return Fail(s);
  }

  // Walk the replica's whole keyspace in comparator order.
  std::printf("keyspace %u, in store order:\n", kKeyspace);
  auto it = (*store)->NewIterator(bigset::ReadOptions(),
                                  bigset::KeyspaceRange(kKeyspace));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    bigset::ParsedKey key;
    if (absl::Status s = bigset::DecodeKey(it->key(), &key); !s.ok()) {
      return Fail(s);
    }
    std::string line = "  " + bigset::KeyDebugString(it->key());
    if (key.kind == bigset::KeyKind::kSetClock) {
      absl::StatusOr<bigset::Clock> clock = bigset::Clock::Decode(it->value());
      if (!clock.ok()) return Fail(clock.status());
      line += "  = " + clock->DebugString() + " (" +
              std::to_string(it->value().size()) + " bytes)";
    }
    std::printf("%s\n", line.c_str());
  }
  if (!it->status().ok()) return Fail(it->status());

  // One set's elements, by seeking its element range.
  std::printf("\nset \"fruits\" elements:\n");
  auto elems = (*store)->NewIterator(
      bigset::ReadOptions(), bigset::ElementsRange(kKeyspace, "fruits"));
  for (elems->SeekToFirst(); elems->Valid(); elems->Next()) {
    bigset::ParsedKey key;
    if (absl::Status s = bigset::DecodeKey(elems->key(), &key); !s.ok()) {
      return Fail(s);
    }
    std::printf("  %-8s dot %s\n", std::string(key.element).c_str(),
                bigset::DotToString(key.dot).c_str());
  }
  return 0;
}
