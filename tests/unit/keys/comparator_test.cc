// The bigset.v1 comparator: namespace separation, delegation to the wrapped
// comparator, and the separator/successor contracts LevelDB relies on.

#include "bigset/keys/comparator.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "bigset/keys/keys.h"
#include "leveldb/slice.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

// An embedder comparator with a non-bytewise order: reversed bytes.
class ReverseComparator final : public leveldb::Comparator {
 public:
  const char* Name() const override { return "test.Reverse"; }
  int Compare(const leveldb::Slice& a, const leveldb::Slice& b) const override {
    return -a.compare(b);
  }
  void FindShortestSeparator(std::string*,
                             const leveldb::Slice&) const override {}
  void FindShortSuccessor(std::string*) const override {}
};

// Keys that straddle the magic byte, and real bigset keys.
std::string RandomMixedKey(Rng& rng) {
  switch (Uniform(rng, 0, 4)) {
    case 0:
      return ElementKey(static_cast<uint32_t>(Uniform(rng, 0, 2)),
                        AdversarialBytes(rng, 3), AdversarialBytes(rng, 4),
                        Dot{Uniform(rng, 0, 3), Uniform(rng, 0, 3)});
    case 1:
      return SetStateSegmentKey(static_cast<uint32_t>(Uniform(rng, 0, 2)),
                                AdversarialBytes(rng, 3), StateKind::kClock,
                                rng(), rng());
    case 2: {
      // Non-bigset keys starting right below and above the magic byte.
      std::string k(1,
                    static_cast<char>(kKeyMagic - 1 + 2 * Uniform(rng, 0, 1)));
      return k + AdversarialBytes(rng, 4);
    }
    case 3: {
      std::string k(1, static_cast<char>(kKeyMagic));
      return k + AdversarialBytes(rng, 6);
    }
    default: {
      std::string k = AdversarialBytes(rng, 6);
      if (Uniform(rng, 0, 1)) k += std::string(Uniform(rng, 0, 3), '\xff');
      return k;
    }
  }
}

int Cmp(const leveldb::Comparator* c, const std::string& a,
        const std::string& b) {
  return c->Compare(leveldb::Slice(a), leveldb::Slice(b));
}

TEST_CASE("comparator: names") {
  CHECK(std::string(BigsetComparator()->Name()) == "bigset.v1");
  ReverseComparator reverse;
  CHECK(std::string(NewBigsetComparator(&reverse)->Name()) ==
        "bigset.v1+test.Reverse");
  CHECK(
      std::string(NewBigsetComparator(leveldb::BytewiseComparator())->Name()) ==
      "bigset.v1");
}

TEST_CASE("comparator: bigset keys first, others in the wrapped order") {
  ReverseComparator reverse;
  auto reversed = NewBigsetComparator(&reverse);
  for (uint64_t seed : Seeds(20)) {
    CAPTURE(seed);
    Rng rng(seed);
    for (int i = 0; i < 5000; ++i) {
      std::string a = RandomMixedKey(rng);
      std::string b = RandomMixedKey(rng);
      for (const leveldb::Comparator* c :
           {BigsetComparator(),
            static_cast<const leveldb::Comparator*>(reversed.get())}) {
        const leveldb::Comparator* wrapped =
            c == BigsetComparator() ? leveldb::BytewiseComparator() : &reverse;
        int r = Cmp(c, a, b);
        REQUIRE(r == -Cmp(c, b, a));
        REQUIRE((r == 0) == (a == b));
        bool ab = IsBigsetKey(a), bb = IsBigsetKey(b);
        if (ab && !bb) REQUIRE(r < 0);
        if (!ab && bb) REQUIRE(r > 0);
        if (!ab && !bb) {
          int w = Cmp(wrapped, a, b);
          REQUIRE((r < 0) == (w < 0));
          REQUIRE((r > 0) == (w > 0));
        }
        if (ab && bb) REQUIRE((r < 0) == (a < b));
      }
    }
  }
}

TEST_CASE("comparator: separator and successor stay within their bounds") {
  for (uint64_t seed : Seeds(20)) {
    CAPTURE(seed);
    Rng rng(seed);
    const leveldb::Comparator* c = BigsetComparator();
    for (int i = 0; i < 5000; ++i) {
      std::string a = RandomMixedKey(rng);
      std::string b = RandomMixedKey(rng);
      if (Cmp(c, a, b) == 0) continue;
      if (Cmp(c, a, b) > 0) std::swap(a, b);
      std::string sep = a;
      c->FindShortestSeparator(&sep, leveldb::Slice(b));
      INFO("start " << KeyDebugString(a) << " limit " << KeyDebugString(b)
                    << " sep " << KeyDebugString(sep));
      REQUIRE(Cmp(c, a, sep) <= 0);
      REQUIRE(Cmp(c, sep, b) < 0);
      REQUIRE(sep.size() <= a.size());
      // Order is preserved against a third key: anything below start is
      // below sep, anything at or above limit is above it.
      std::string x = RandomMixedKey(rng);
      if (Cmp(c, x, a) < 0) REQUIRE(Cmp(c, x, sep) < 0);
      if (Cmp(c, x, b) >= 0) REQUIRE(Cmp(c, x, sep) > 0);

      std::string succ = a;
      c->FindShortSuccessor(&succ);
      REQUIRE(Cmp(c, a, succ) <= 0);
      REQUIRE(succ.size() <= a.size());
      REQUIRE(IsBigsetKey(succ) == IsBigsetKey(a));
    }
  }
}

TEST_CASE(
    "comparator: wrapped results that would enter the namespace are refused") {
  const leveldb::Comparator* c = BigsetComparator();
  // Bytewise would turn "\x04zz" < "\x07" into "\x05", a bigset key that
  // sorts before "\x04zz".
  std::string start = "\x04zz";
  c->FindShortestSeparator(&start, leveldb::Slice("\x07"));
  CHECK(Cmp(c, "\x04zz", start) <= 0);
  CHECK_FALSE(IsBigsetKey(start));
  std::string succ = "\x04\xff\xff";
  c->FindShortSuccessor(&succ);
  CHECK_FALSE(IsBigsetKey(succ));
  CHECK(Cmp(c, "\x04\xff\xff", succ) <= 0);
  // A bigset key followed by an embedder key shortens inside the namespace.
  std::string big = ElementKey(1, "set", "element", Dot{5, 6});
  std::string sep = big;
  c->FindShortestSeparator(&sep, leveldb::Slice("zzz"));
  CHECK(IsBigsetKey(sep));
  CHECK(sep.size() < big.size());
  CHECK(Cmp(c, big, sep) <= 0);
}

}  // namespace
}  // namespace bigset::testing
