// bigset_store_demo: writes a few sets through a replica (one atomic batch
// per insert: the set-clock's header and one element key), then walks the
// replica's keyspace and prints every key decoded, with the size of its
// value.
//
// Usage: bigset_store_demo [database directory]   (default: a fresh temp dir)

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bigset/keys/keys.h"
#include "bigset/replica/replica.h"
#include "bigset/store/leveldb_store.h"

namespace {

constexpr bigset::KeyspaceId kKeyspace = 1;

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "error: %s\n", std::string(s.ToString()).c_str());
  return 1;
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

  bigset::ReplicaOptions options;
  options.keyspace = kKeyspace;
  auto replica = bigset::Replica::Open(store->get(), options);
  if (!replica.ok()) return Fail(replica.status());
  const std::vector<std::pair<std::string, std::string>> inserts = {
      {"fruits", "pear"},  {"fruits", "apple"},
      {"colors", "red"},   {"fruits", "banana"},
      {"colors", "green"}, {"colors", std::string("nul\0byte", 8)},
      {"fruits", "apple"},  // A second insert: a second dot, a second key.
  };
  for (const auto& [set, element] : inserts) {
    bigset::UpdateOp op = bigset::UpdateOp::Add(element);
    absl::StatusOr<bigset::Delta> d = (*replica)->Update(set, {&op, 1});
    if (!d.ok()) return Fail(d.status());
  }
  // A dot of another actor that arrives out of order leaves a gap: the
  // set-clock then has a cloud, stored as a segment key.
  bigset::Delta remote;
  remote.set = "colors";
  remote.ops.push_back(bigset::DeltaOp{"blue", {}, bigset::Dot{0xb0b, 7}});
  if (absl::Status s = (*replica)->Apply(remote); !s.ok()) return Fail(s);
  if (absl::Status s = (*replica)->Close(); !s.ok()) return Fail(s);

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
    if (!it->value().empty()) {
      line += "  (" + std::to_string(it->value().size()) + " value bytes)";
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
