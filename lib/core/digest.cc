#include "core/digest.h"

#include <cstring>

namespace bigset::digest {
namespace {

constexpr uint64_t kPrime = (uint64_t{1} << 61) - 1;  // Mersenne, 2^61 - 1.
// The evaluation point of the polynomial hash (any value in [2, p - 1];
// fixed, so that every node computes the same digests).
constexpr uint64_t kRoot = 0x1d6b3c5a9e27f4b1ULL % kPrime;

uint64_t MulMod(uint64_t a, uint64_t b) {
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  uint64_t lo = static_cast<uint64_t>(p & kPrime);
  uint64_t hi = static_cast<uint64_t>(p >> 61);
  uint64_t r = lo + hi;
  return r >= kPrime ? r - kPrime : r;
}

uint64_t AddMod(uint64_t a, uint64_t b) {
  uint64_t r = a + b;
  return r >= kPrime ? r - kPrime : r;
}

uint64_t SubMod(uint64_t a, uint64_t b) {
  return a >= b ? a - b : a + kPrime - b;
}

uint64_t PowMod(uint64_t base, uint64_t e) {
  uint64_t r = 1;
  while (e > 0) {
    if (e & 1) r = MulMod(r, base);
    base = MulMod(base, base);
    e >>= 1;
  }
  return r;
}

// kRoot^e with a table of kRoot^(b * 256^k), k < 8, b < 256 (16 KiB):
// at most eight multiplications, where square-and-multiply takes up to 128
// (a dot's digest is on every insert's path).
uint64_t PowRoot(uint64_t e) {
  struct Table {
    uint64_t t[8][256];
  };
  static const Table* const table = [] {
    auto* tb = new Table;
    uint64_t base = kRoot;  // kRoot^(256^k).
    for (int k = 0; k < 8; ++k) {
      tb->t[k][0] = 1;
      for (int b = 1; b < 256; ++b) tb->t[k][b] = MulMod(tb->t[k][b - 1], base);
      base = MulMod(tb->t[k][255], base);
    }
    return tb;
  }();
  uint64_t r = 1;
  for (int k = 0; e != 0; ++k, e >>= 8) {
    if ((e & 0xFF) != 0) r = MulMod(r, table->t[k][e & 0xFF]);
  }
  return r;
}

// 1 / (kRoot - 1) mod p, by Fermat.
uint64_t InverseRootMinusOne() {
  static const uint64_t inv = PowMod(kRoot - 1, kPrime - 2);
  return inv;
}

// The actor's coefficient: a non-zero field element.
uint64_t ActorCoefficient(ActorId actor) {
  return Mix(actor ^ 0x9e3779b97f4a7c15ULL) % (kPrime - 1) + 1;
}

}  // namespace

uint64_t Hash64(std::string_view bytes, uint64_t seed) {
  uint64_t h = Mix(seed ^ (bytes.size() * 0x9e3779b97f4a7c15ULL));
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = Mix(h ^ w) * 0x9e3779b97f4a7c15ULL;
  }
  uint64_t tail = 0;
  for (size_t k = 0; i + k < bytes.size(); ++k) {
    tail |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i + k]))
            << (8 * k);
  }
  return Mix(h ^ tail ^ 0x2545f4914f6cdd1dULL);
}

uint64_t KeyDigest(std::string_view element, Dot dot) {
  return Mix(Hash64(element) ^ Mix(dot.actor + 0x632be59bd9b4e019ULL) ^
             (dot.counter * 0xd6e8feb86659fd93ULL));
}

uint64_t RunDigest(ActorId actor, uint64_t lo, uint64_t hi) {
  // sum_{c=lo}^{hi} r^c = (r^(hi+1) - r^lo) / (r - 1).
  const uint64_t top = PowRoot(hi == UINT64_MAX ? hi : hi + 1);
  uint64_t top_full = top;
  if (hi == UINT64_MAX) top_full = MulMod(top, kRoot);
  const uint64_t sum =
      MulMod(SubMod(top_full, PowRoot(lo)), InverseRootMinusOne());
  return MulMod(sum, ActorCoefficient(actor));
}

uint64_t DotDigest(Dot dot) {
  // The run [c, c]: kRoot^c, times the actor's coefficient.
  return MulMod(PowRoot(dot.counter), ActorCoefficient(dot.actor));
}

uint64_t ClockDigest(const Clock& clock) {
  // The sum of RunDigest over the runs, with the factors every run of one
  // actor shares (its coefficient, 1 / (kRoot - 1)) taken out of the sum,
  // and each power reached from the previous one: runs come in ascending
  // order and a cloud's are close, so a step is usually one table entry.
  // (A set whose clock is not cached computes this on every load.)
  uint64_t total = 0;  // Over finished actors, factors applied.
  uint64_t runs = 0;   // Sum of r^(hi+1) - r^lo for the current actor.
  ActorId actor = 0;
  bool any = false;
  uint64_t at = 0;     // The last exponent computed ...
  uint64_t power = 1;  // ... and kRoot^at.
  auto pow_to = [&](uint64_t e) {
    power = e >= at ? MulMod(power, PowRoot(e - at)) : PowRoot(e);
    at = e;
    return power;
  };
  auto finish_actor = [&] {
    if (any) total = AddMod(total, MulMod(runs, ActorCoefficient(actor)));
  };
  clock.ForEachInterval([&](ActorId a, uint64_t lo, uint64_t hi) {
    if (!any || a != actor) {
      finish_actor();
      actor = a;
      any = true;
      runs = 0;
    }
    const uint64_t low = pow_to(lo);
    // kRoot^(hi + 1); at the top of the range, kRoot^(2^64) = kRoot^hi * r.
    const uint64_t top =
        hi == UINT64_MAX ? MulMod(pow_to(hi), kRoot) : pow_to(hi + 1);
    runs = AddMod(runs, SubMod(top, low));
  });
  finish_actor();
  return MulMod(total, InverseRootMinusOne());
}

uint64_t AddClockDigests(uint64_t a, uint64_t b) { return AddMod(a, b); }

uint64_t SetNameHash(std::string_view set) {
  return Hash64(set, 0x51ed270b27e1c0f3ULL);
}

uint64_t SetDigestOfHash(uint64_t name_hash, uint64_t keys_digest,
                         uint64_t clock_digest, bool tombstone_empty) {
  return Mix(name_hash ^ Mix(keys_digest) ^
             Mix(clock_digest + 0x3c6ef372fe94f82bULL) ^
             (tombstone_empty ? 0 : 0xa54ff53a5f1d36f1ULL));
}

uint64_t SetDigest(std::string_view set, uint64_t keys_digest,
                   uint64_t clock_digest, bool tombstone_empty) {
  return SetDigestOfHash(SetNameHash(set), keys_digest, clock_digest,
                         tombstone_empty);
}

}  // namespace bigset::digest
