// Anti-entropy at scale (lib/cluster/anti_entropy.h): a partition whose
// replicas differ in tens of thousands of sets, past every bound of a round
// (the suspects awaiting their second sighting, the bytes of a round's set
// summaries, the push queue), while some sets keep being written and some
// missed removes wait for a full exchange; and the memory of an answer to a
// set-summaries request, which must follow the difference, not the
// partition.
//
// Replicas are inspected one by one (Node::LocalReplica): no cluster read,
// so no read repair. BIGSET_TEST_SCALE multiplies the sets of a run and the
// seeds. The figures of the runs are printed as warnings:
//   ./build-test/tests/anti_entropy_scale_test

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <functional>
#include <map>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/testing/sim.h"
#include "core/digest.h"
#include "manual_cluster.h"
#include "net/message.h"
#include "replica_views.h"
#include "test_util.h"

// ---- Heap bytes live, and their peak, for the memory test: every
// operator new of this binary goes through here.

namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

void* Counted(void* p) {
  if (p == nullptr) throw std::bad_alloc();
  const int64_t size = static_cast<int64_t>(malloc_usable_size(p));
  const int64_t now = g_live.fetch_add(size) + size;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void* Allocate(size_t n) { return Counted(std::malloc(n == 0 ? 1 : n)); }

void* AllocateAligned(size_t n, std::align_val_t align) {
  const size_t a = static_cast<size_t>(align);
  return Counted(std::aligned_alloc(a, std::max(a, (n + a - 1) / a * a)));
}

void Release(void* p) {
  if (p == nullptr) return;
  g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
  std::free(p);
}

}  // namespace

void* operator new(size_t n) { return Allocate(n); }
void* operator new[](size_t n) { return Allocate(n); }
void* operator new(size_t n, std::align_val_t a) {
  return AllocateAligned(n, a);
}
void* operator new[](size_t n, std::align_val_t a) {
  return AllocateAligned(n, a);
}
void operator delete(void* p) noexcept { Release(p); }
void operator delete[](void* p) noexcept { Release(p); }
void operator delete(void* p, size_t) noexcept { Release(p); }
void operator delete[](void* p, size_t) noexcept { Release(p); }
void operator delete(void* p, std::align_val_t) noexcept { Release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { Release(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { Release(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept {
  Release(p);
}

namespace bigset {
namespace {

using testing::Merge;
using testing::ReplicaView;
using testing::Rng;
using testing::SameAs;
using testing::Seeds;
using testing::SetsOnlyOn;
using testing::Uniform;
using testing::Value;
using testing::View;
using testing::Views;

constexpr uint64_t kSecond = 1'000'000;

// The most heap bytes live at once while `fn` runs, above those live
// before it.
int64_t PeakGrowth(const std::function<void()>& fn) {
  const int64_t before = g_live.load();
  g_peak.store(before);
  fn();
  return g_peak.load() - before;
}

TEST_CASE(
    "anti-entropy regression: a set-summaries answer holds the clocks of the "
    "sets that differ, not of every set it lists") {
  // The answer to kAeSets loaded every set of the requested buckets, clocks
  // included, before cutting to its size bound, and took any number of
  // buckets: its memory followed the partition, not the difference.
  NodeOptions o;
  o.anti_entropy_interval_micros = 0;
  testing::ManualCluster c(2, 2, /*ring_size=*/1, o);
  // A clock of 1,000 actors (16 KB in memory) for every set, on both
  // replicas; one set has one dot more on node 2.
  Clock context;
  for (ActorId a = 1; a <= 1000; ++a) context.AddDot({a * 7919, 1});
  std::vector<std::string> sets;
  for (int i = 0; i < 1000; ++i) sets.push_back(absl::StrCat("big", i));
  Replica* r1 = c.node(1).LocalReplica(0);
  Replica* r2 = c.node(2).LocalReplica(0);
  for (Replica* r : {r1, r2}) {
    for (const std::string& set : sets) REQUIRE(r->Clear(set, context).ok());
  }
  const std::string& odd = sets[500];
  Clock more;
  more.AddDot({7, 1});
  REQUIRE(r2->Clear(odd, more).ok());
  // A round's request: 64 buckets, the odd set's among them, with node 1's
  // summaries of their sets.
  const uint32_t n = r1->digest_buckets();
  REQUIRE(n > 64);
  std::set<uint32_t> chosen = {digest::BucketOf(odd, n)};
  for (uint32_t b = 0; chosen.size() < 64; ++b) chosen.insert(b);
  Message m;
  m.header = MessageHeader{MessageType::kAeSets, 1000, 0};
  m.numbers.assign(chosen.begin(), chosen.end());
  std::vector<std::string> asked;
  for (const std::string& set : sets) {
    if (!chosen.contains(digest::BucketOf(set, n))) continue;
    auto s = r1->Summarize(set);
    REQUIRE(s.ok());
    s->clock = Clock();
    m.summaries.push_back(*std::move(s));
    asked.push_back(set);
  }
  // What the clocks of the asked sets take, held at once.
  std::vector<Clock> copies;
  const int64_t held = PeakGrowth([&] {
    for (const std::string& set : asked) copies.push_back(*r2->GetClock(set));
  });
  copies.clear();
  auto reply = [&](uint64_t id) {
    std::optional<Message> got;
    for (const auto& sent : c.queue()) {
      if (sent.from != 2 || sent.type() != MessageType::kAeSetsReply) continue;
      auto decoded = Message::Decode(sent.bytes);
      REQUIRE(decoded.ok());
      if (decoded->header.request_id == id) got = *std::move(decoded);
    }
    REQUIRE(got.has_value());
    return *got;
  };
  // Nothing left for LevelDB to compact in the background meanwhile, and
  // its block cache filled by one answer first.
  REQUIRE(c.store(2).CompactRange(KeyRange{}).ok());
  c.node(2).Receive(1, m.Encode());
  m.header.request_id = 1001;
  const std::string request = m.Encode();
  const int64_t answer = PeakGrowth([&] { c.node(2).Receive(1, request); });
  CAPTURE(asked.size(), held, answer);
  CHECK(answer * 4 < held);
  const Message answered = reply(1001);
  REQUIRE(answered.status.ok());
  REQUIRE(answered.summaries.size() == 1);
  CHECK(answered.summaries[0].set == odd);
  CHECK(answered.summaries[0].clock == *r2->GetClock(odd));
  // More buckets than a round asks about: refused, nothing read.
  m.header.request_id = 1002;
  m.numbers.clear();
  for (uint32_t b = 0; b < n; ++b) m.numbers.push_back(b);
  const std::string all = m.Encode();
  const int64_t refused = PeakGrowth([&] { c.node(2).Receive(1, all); });
  CAPTURE(refused);
  CHECK(refused * 4 < held);
  CHECK(reply(1002).status.code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bigset
