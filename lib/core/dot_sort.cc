#include "core/dot_sort.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace bigset {
namespace {

// Below this many dots a comparison sort is as fast.
constexpr size_t kRadixMin = 512;
// A radix pass over actors ranks them in a byte: more actors than this
// take the comparison sort.
constexpr size_t kMaxRankedActors = 256;

// One stable counting-sort pass of `from` into `to` by key(dot) < 256.
template <typename Key>
void Pass(const Dot* from, Dot* to, size_t n, Key key) {
  std::array<size_t, 256> offset{};
  for (size_t i = 0; i < n; ++i) ++offset[key(i, from[i])];
  size_t sum = 0;
  for (size_t& o : offset) sum += std::exchange(o, sum);
  for (size_t i = 0; i < n; ++i) to[offset[key(i, from[i])]++] = from[i];
}

}  // namespace

void SortDots(std::vector<Dot>* dots) {
  const size_t n = dots->size();
  if (n < kRadixMin) {
    std::sort(dots->begin(), dots->end());
    return;
  }
  // The actors present, ascending (few, as a rule), and the counter bits
  // in which any two dots differ.
  std::vector<ActorId> actors;
  const uint64_t base = (*dots)[0].counter;
  uint64_t differ = 0;
  ActorId last = (*dots)[0].actor;
  actors.push_back(last);
  for (const Dot& d : *dots) {
    differ |= d.counter ^ base;
    if (d.actor == last) continue;
    last = d.actor;
    auto at = std::lower_bound(actors.begin(), actors.end(), last);
    if (at != actors.end() && *at == last) continue;
    if (actors.size() == kMaxRankedActors) {
      std::sort(dots->begin(), dots->end());
      return;
    }
    actors.insert(at, last);
  }
  std::vector<Dot> buffer(n);
  Dot* from = dots->data();
  Dot* to = buffer.data();
  // Least significant first: the counter's differing bytes, then the
  // actor's rank.
  for (int shift = 0; shift < 64; shift += 8) {
    if (((differ >> shift) & 0xff) == 0) continue;
    Pass(from, to, n, [shift](size_t, const Dot& d) {
      return static_cast<size_t>((d.counter >> shift) & 0xff);
    });
    std::swap(from, to);
  }
  if (actors.size() > 1) {
    std::vector<uint8_t> rank(n);
    for (size_t i = 0; i < n; ++i) {
      rank[i] = static_cast<uint8_t>(
          std::lower_bound(actors.begin(), actors.end(), from[i].actor) -
          actors.begin());
    }
    Pass(from, to, n, [&rank](size_t i, const Dot&) { return rank[i]; });
    std::swap(from, to);
  }
  if (from != dots->data()) dots->swap(buffer);
}

}  // namespace bigset
