// Key codec: round trips, logical order under the comparator, ranges, and
// decoding of garbage and truncated keys.

#include "bigset/keys/keys.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "bigset/keys/comparator.h"
#include "keys/keys_internal.h"
#include "leveldb/slice.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

// A key as the tuple it stands for. Ordered logically, field by field.
struct LogicalKey {
  KeyspaceId keyspace = 0;
  int section = 0;   // 0 metadata, 1 set
  std::string name;  // metadata name, or set name
  int kind = 0;      // 0 clock, 1 tombstone, 2 element, 3 end
  int part = 0;      // clock, tombstone: 0 header, 1 segment
  std::string element;
  uint64_t actor = 0;
  uint64_t counter = 0;  // element: counter; segment: window

  auto Tie() const {
    return std::tie(keyspace, section, name, kind, part, element, actor,
                    counter);
  }
  bool operator<(const LogicalKey& o) const { return Tie() < o.Tie(); }
  bool operator==(const LogicalKey& o) const { return Tie() == o.Tie(); }

  std::string Encode() const {
    if (section == 0) return MetadataKey(keyspace, name);
    switch (kind) {
      case 0:
      case 1: {
        const StateKind sk =
            kind == 0 ? StateKind::kClock : StateKind::kTombstone;
        return part == 0
                   ? SetStateKey(keyspace, name, sk)
                   : SetStateSegmentKey(keyspace, name, sk, actor, counter);
      }
      case 2:
        return ElementKey(keyspace, name, element, Dot{actor, counter});
      default:
        return EndOfSetKey(keyspace, name);
    }
  }
};

uint64_t EdgyU64(Rng& rng) {
  switch (Uniform(rng, 0, 5)) {
    case 0:
      return 0;
    case 1:
      return ~uint64_t{0};
    case 2:
      return Uniform(rng, 0, 3);
    case 3:
      return (~uint64_t{0}) - Uniform(rng, 0, 3);
    case 4:
      return uint64_t{1} << Uniform(rng, 0, 63);
    default:
      return rng();
  }
}

LogicalKey RandomKey(Rng& rng, const std::vector<std::string>& names) {
  LogicalKey k;
  k.keyspace = Uniform(rng, 0, 3) == 0
                   ? ~uint32_t{0}
                   : static_cast<uint32_t>(Uniform(rng, 0, 2));
  k.section = Uniform(rng, 0, 9) == 0 ? 0 : 1;
  k.name = names[Uniform(rng, 0, names.size() - 1)];
  if (k.section == 0) return k;
  k.kind = static_cast<int>(Uniform(rng, 0, 3));
  if ((k.kind == 0 || k.kind == 1) && Uniform(rng, 0, 1)) {
    k.part = 1;
    k.actor = EdgyU64(rng);
    k.counter = EdgyU64(rng);
  }
  if (k.kind == 2) {
    k.element = AdversarialBytes(rng, 6);
    k.actor = EdgyU64(rng);
    k.counter = EdgyU64(rng);
  }
  return k;
}

std::vector<std::string> RandomNames(Rng& rng, int n) {
  std::vector<std::string> names = {
      "",    std::string("\0", 1),  std::string("\0\0", 2),
      "a",   std::string("a\0", 2), "a\x01",
      "\xff"};
  for (int i = 0; i < n; ++i) names.push_back(AdversarialBytes(rng, 5));
  return names;
}

// Runs `body(rng, names)` once for each of Seeds(seed_count), the seed
// captured: `rng` seeded with it and `names` RandomNames(rng, name_count).
template <typename Body>
void ForEachSeedNames(int seed_count, int name_count, Body body) {
  ForEachSeed(seed_count,
              [&](Rng& rng) { body(rng, RandomNames(rng, name_count)); });
}

// `n` RandomKeys over `names`.
std::vector<LogicalKey> RandomKeys(Rng& rng,
                                   const std::vector<std::string>& names,
                                   int n) {
  std::vector<LogicalKey> keys;
  for (int i = 0; i < n; ++i) keys.push_back(RandomKey(rng, names));
  return keys;
}

void CheckDecodesTo(const LogicalKey& k, const std::string& enc) {
  ParsedKey p;
  REQUIRE(DecodeKey(enc, &p).ok());
  CHECK(p.keyspace == k.keyspace);
  if (k.section == 0) {
    CHECK(p.kind == KeyKind::kMetadata);
    CHECK(p.metadata_name == k.name);
    return;
  }
  CHECK(p.set == k.name);
  switch (k.kind) {
    case 0:
    case 1:
      CHECK(p.kind ==
            (k.kind == 0 ? KeyKind::kSetClock : KeyKind::kSetTombstone));
      CHECK(p.segment == (k.part == 1));
      CHECK(p.dot.actor == k.actor);
      CHECK(p.dot.counter == k.counter);
      break;
    case 2:
      CHECK(p.kind == KeyKind::kElement);
      CHECK(p.element == k.element);
      CHECK(p.dot.actor == k.actor);
      CHECK(p.dot.counter == k.counter);
      break;
    default:
      CHECK(p.kind == KeyKind::kEndOfSet);
  }
}

int Cmp(const std::string& a, const std::string& b) {
  return BigsetComparator()->Compare(leveldb::Slice(a), leveldb::Slice(b));
}

bool InRange(const KeyRange& r, const std::string& k) {
  return Cmp(r.start, k) <= 0 && (r.limit.empty() || Cmp(k, r.limit) < 0);
}

TEST_CASE("keys: encode/decode round trip of random adversarial tuples") {
  ForEachSeedNames(20, 20, [](Rng& rng, const std::vector<std::string>& names) {
    for (int i = 0; i < 2000; ++i) {
      LogicalKey k = RandomKey(rng, names);
      CheckDecodesTo(k, k.Encode());
    }
  });
}

TEST_CASE("keys: comparator order over encodings equals logical order") {
  ForEachSeedNames(20, 10, [](Rng& rng, const std::vector<std::string>& names) {
    const std::vector<LogicalKey> keys = RandomKeys(rng, names, 3000);
    std::vector<LogicalKey> logical = keys;
    std::sort(logical.begin(), logical.end());
    std::vector<std::pair<std::string, size_t>> encoded;
    for (size_t i = 0; i < keys.size(); ++i) {
      encoded.emplace_back(keys[i].Encode(), i);
    }
    std::sort(encoded.begin(), encoded.end(), [](const auto& a, const auto& b) {
      return Cmp(a.first, b.first) < 0;
    });
    for (size_t i = 0; i < logical.size(); ++i) {
      INFO("position " << i << ": " << KeyDebugString(encoded[i].first));
      REQUIRE(keys[encoded[i].second] == logical[i]);
    }
    // Equal encodings iff equal tuples.
    for (size_t i = 1; i < encoded.size(); ++i) {
      bool same_tuple = keys[encoded[i].second] == keys[encoded[i - 1].second];
      REQUIRE((encoded[i].first == encoded[i - 1].first) == same_tuple);
    }
  });
}

TEST_CASE("keys: ranges contain exactly their keys") {
  ForEachSeedNames(10, 8, [](Rng& rng, const std::vector<std::string>& names) {
    const std::vector<LogicalKey> keys = RandomKeys(rng, names, 1500);
    for (int probe = 0; probe < 20; ++probe) {
      const LogicalKey& target = keys[Uniform(rng, 0, keys.size() - 1)];
      KeyspaceId ks = target.keyspace;
      const std::string& set = target.name;
      const std::string& element = target.element;
      KeyRange ks_range = KeyspaceRange(ks);
      KeyRange meta_range = MetadataRange(ks);
      KeyRange sets_range = AllSetsRange(ks);
      KeyRange set_range = SetRange(ks, set);
      KeyRange clocks = SetClocksRange(ks, set);
      KeyRange tombs = SetTombstonesRange(ks, set);
      KeyRange elems = ElementsRange(ks, set);
      KeyRange elem = ElementRange(ks, set, element);
      for (const LogicalKey& k : keys) {
        std::string enc = k.Encode();
        INFO(KeyDebugString(enc));
        bool same_ks = k.keyspace == ks;
        bool in_set = same_ks && k.section == 1 && k.name == set;
        REQUIRE(InRange(ks_range, enc) == same_ks);
        REQUIRE(InRange(meta_range, enc) == (same_ks && k.section == 0));
        REQUIRE(InRange(sets_range, enc) == (same_ks && k.section == 1));
        REQUIRE(InRange(set_range, enc) == in_set);
        REQUIRE(InRange(clocks, enc) == (in_set && k.kind == 0));
        REQUIRE(InRange(tombs, enc) == (in_set && k.kind == 1));
        REQUIRE(InRange(elems, enc) == (in_set && k.kind == 2));
        REQUIRE(InRange(elem, enc) ==
                (in_set && k.kind == 2 && k.element == element));
        if (in_set && k.kind == 2 && k.element == element) {
          REQUIRE(Cmp(ElementSeekKey(ks, set, element), enc) <= 0);
        }
      }
    }
  });
}

TEST_CASE("keys: NUL and 0xFF bytes in names keep sets apart") {
  std::string a = "a";
  std::string a0("a\0", 2);
  std::string a00("a\0\0", 3);
  // Every key of "a" (including its end-of-set key) sorts before every key
  // of "a\0", which sorts before "a\0\0" and "a\x01".
  CHECK(Cmp(EndOfSetKey(1, a), SetClockKey(1, a0)) < 0);
  CHECK(Cmp(EndOfSetKey(1, a0), SetClockKey(1, a00)) < 0);
  CHECK(Cmp(EndOfSetKey(1, a00), SetClockKey(1, "a\x01")) < 0);
  CHECK(Cmp(ElementKey(1, a, "\xff\xff", Dot{~0ull, ~0ull}),
            EndOfSetKey(1, a)) < 0);
  CHECK_FALSE(InRange(SetRange(1, a), SetClockKey(1, a0)));
  CHECK_FALSE(InRange(ElementRange(1, "s", "x"),
                      ElementKey(1, "s", std::string("x\0", 2), Dot{0, 1})));
  CHECK_FALSE(InRange(ElementRange(1, "s", "x"),
                      ElementKey(1, "s", "x\x01", Dot{0, 1})));
  CHECK(InRange(ElementRange(1, "s", "x"),
                ElementKey(1, "s", "x", Dot{~0ull, ~0ull})));
  // Empty set name and empty element are valid.
  ParsedKey p;
  REQUIRE(DecodeKey(ElementKey(0, "", "", Dot{1, 2}), &p).ok());
  CHECK(p.set.empty());
  CHECK(p.element.empty());
  CHECK(p.dot == Dot{1, 2});
}

TEST_CASE("keys: the element-key fast paths agree with ElementKey") {
  for (uint64_t seed : Seeds(20)) {
    CAPTURE(seed);
    Rng rng(seed);
    // Names without NUL bytes take AppendElementKey's one-pass path: half
    // the sets and half the elements have none.
    auto without_nul = [](std::string s) {
      s.erase(std::remove(s.begin(), s.end(), '\0'), s.end());
      return s;
    };
    std::string set = AdversarialBytes(rng, 12);
    if (seed % 2 == 0) set = without_nul(set);
    const KeyspaceId ks = static_cast<KeyspaceId>(Uniform(rng, 0, 1000));
    const std::string prefix = ElementsRange(ks, set).start;
    REQUIRE(prefix.size() == internal::ElementKeyPrefixLength(set));
    std::string key = prefix;
    for (int i = 0; i < 200; ++i) {
      std::string element = AdversarialBytes(rng, 20);
      if (i % 2 == 0) element = without_nul(element);
      const Dot dot{rng(), rng()};
      const std::string want = ElementKey(ks, set, element, dot);
      key.resize(prefix.size());
      internal::AppendElementKeyAfterPrefix(&key, element, dot);
      REQUIRE(key == want);
      // AppendElementKey appends (a writer reuses one buffer): with and
      // without NUL bytes in the names, its two ways of writing agree.
      std::string appended = "x";
      AppendElementKey(&appended, ks, set, element, dot);
      REQUIRE(appended == "x" + want);
      std::string_view decoded;
      std::string storage;
      Dot back;
      REQUIRE(internal::DecodeElementKeyAfterPrefix(key, prefix.size(),
                                                    &decoded, &storage, &back));
      CHECK(decoded == element);
      CHECK(back == dot);
    }
  }
}

TEST_CASE("keys: decoding is zero-copy without NUL bytes") {
  std::string k = ElementKey(7, "myset", "elem", Dot{3, 4});
  ParsedKey p;
  REQUIRE(DecodeKey(k, &p).ok());
  CHECK(p.set.data() >= k.data());
  CHECK(p.set.data() < k.data() + k.size());
  CHECK(p.element.data() >= k.data());
  CHECK(p.element.data() < k.data() + k.size());
}

TEST_CASE("keys: truncated keys and garbage decode to an error") {
  ForEachSeedNames(10, 10, [](Rng& rng, const std::vector<std::string>& names) {
    for (int i = 0; i < 500; ++i) {
      LogicalKey k = RandomKey(rng, names);
      if (k.section == 0) continue;  // Any prefix of metadata is metadata.
      std::string enc = k.Encode();
      for (size_t len = 0; len < enc.size(); ++len) {
        ParsedKey p;
        INFO(KeyDebugString(enc) << " cut at " << len);
        REQUIRE_FALSE(DecodeKey(enc.substr(0, len), &p).ok());
      }
      // Trailing bytes are an error too.
      ParsedKey p;
      REQUIRE_FALSE(DecodeKey(enc + "x", &p).ok());
    }
    // Random bytes: either an error, or a canonical encoding of what it
    // decodes to.
    for (int i = 0; i < 5000; ++i) {
      std::string junk = AdversarialBytes(rng, 40);
      if (Uniform(rng, 0, 1) == 0) {
        std::string prefix = ElementKey(0, "s", "e", Dot{1, 1});
        junk = prefix.substr(0, Uniform(rng, 0, prefix.size())) + junk;
      }
      ParsedKey p;
      absl::Status s = DecodeKey(junk, &p);
      if (!s.ok()) continue;
      std::string re;
      switch (p.kind) {
        case KeyKind::kMetadata:
          re = MetadataKey(p.keyspace, p.metadata_name);
          break;
        case KeyKind::kSetClock:
        case KeyKind::kSetTombstone: {
          const StateKind sk = p.kind == KeyKind::kSetClock
                                   ? StateKind::kClock
                                   : StateKind::kTombstone;
          re = p.segment ? SetStateSegmentKey(p.keyspace, p.set, sk,
                                              p.dot.actor, p.dot.counter)
                         : SetStateKey(p.keyspace, p.set, sk);
          break;
        }
        case KeyKind::kElement:
          re = ElementKey(p.keyspace, p.set, p.element, p.dot);
          break;
        case KeyKind::kEndOfSet:
          re = EndOfSetKey(p.keyspace, p.set);
          break;
      }
      REQUIRE(re == junk);
    }
  });
  ParsedKey p;
  CHECK_FALSE(DecodeKey("", &p).ok());
  CHECK_FALSE(DecodeKey("plain embedder key", &p).ok());
  std::string future = SetClockKey(0, "s");
  future[1] = 0x03;
  absl::Status s = DecodeKey(future, &p);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(s.message()).find("version") != std::string::npos);
}

TEST_CASE("keys: debug strings name the key's fields") {
  CHECK(KeyDebugString(ElementKey(3, "s", "e", Dot{0xab, 7})) ==
        "ks3/set:\"s\"/elem:\"e\"/dot:ab.7");
  CHECK(KeyDebugString("xyz") == "raw:\"xyz\"");
}

}  // namespace
}  // namespace bigset::testing
