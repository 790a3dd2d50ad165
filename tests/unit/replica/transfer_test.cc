// Set transfer (hand-off) between replicas: the receiver's side,
// ApplyTransferChunk and FinishTransfer, fed by the sender's Read.
//
// The property: after a transfer from each sender, the receiver holds the
// ORSWOT join of the values and clocks all of them had when their
// transfers started, whatever happened before (lost deltas, removes, clears,
// sweeps), however the stream is chunked, interleaved with another sender's,
// or restarted from the beginning.

#include <catch2/catch.hpp>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bigset/replica/replica.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

constexpr std::string_view kSet = "s";

using Value = std::map<std::string, std::set<Dot>>;

Value ValueOf(const std::vector<ElementDots>& elements) {
  Value v;
  for (const ElementDots& e : elements) {
    v[e.element].insert(e.dots.begin(), e.dots.end());
  }
  return v;
}

// The ORSWOT join: a dot both hold, or one holds and the other never saw.
Value Join(const Value& a, const Clock& ca, const Value& b, const Clock& cb) {
  Value out;
  for (const auto& [e, dots] : a) {
    for (Dot d : dots) {
      auto it = b.find(e);
      const bool in_b = it != b.end() && it->second.count(d);
      if (in_b || !cb.Seen(d)) out[e].insert(d);
    }
  }
  for (const auto& [e, dots] : b) {
    for (Dot d : dots) {
      if (!ca.Seen(d)) out[e].insert(d);
    }
  }
  return out;
}

using Node = testing::MemReplica;

// One sender's transfer in progress.
struct Transfer {
  Replica* from;
  std::unique_ptr<SetReader> reader;
  Clock tracker;
  bool done = false;

  void Start(Rng& rng) {
    SetReadOptions o;
    o.batch_size = Uniform(rng, 1, 7);
    auto r = from->Read(kSet, o);
    REQUIRE(r.ok());
    reader = std::move(*r);
    tracker.clear();
  }
  // Sends one chunk to `to`; finishes after the last.
  void Step(Replica& to) {
    std::vector<ElementDots> chunk;
    auto more = reader->Next(&chunk);
    REQUIRE(more.ok());
    REQUIRE(to.ApplyTransferChunk(kSet, chunk, &tracker).ok());
    if (!*more) {
      REQUIRE(to.FinishTransfer(kSet, reader->clock(), tracker).ok());
      done = true;
    }
  }
};

// Random updates on three replicas with deltas delivered late, partly or
// never, then transfers into replica 1 from replica 0 (and maybe 2).
void RunTransferModel(uint64_t seed) {
  Rng rng(seed);
  std::vector<std::unique_ptr<Node>> nodes;
  for (ActorId a : {0xA0ull, 0xB0ull, 0xC0ull}) {
    nodes.push_back(std::make_unique<Node>(a));
  }
  std::deque<std::pair<int, Delta>> pending;  // (destination, delta)
  const int ops = static_cast<int>(Uniform(rng, 20, 200));
  for (int i = 0; i < ops; ++i) {
    const int n = static_cast<int>(Uniform(rng, 0, 2));
    Replica& r = *nodes[n]->replica;
    const std::string element(1, static_cast<char>('a' + Uniform(rng, 0, 9)));
    absl::StatusOr<Delta> delta;
    const uint64_t kind = Uniform(rng, 0, 19);
    if (kind < 11) {
      UpdateOp op = UpdateOp::Add(element);
      op.context_from_replica = Uniform(rng, 0, 1) == 0;
      delta = r.Update(kSet, std::span(&op, 1));
    } else if (kind < 18) {
      UpdateOp op = UpdateOp::Remove(element, {});
      op.context_from_replica = true;
      delta = r.Update(kSet, std::span(&op, 1));
    } else if (kind < 19) {
      auto clock = r.GetClock(kSet);
      REQUIRE(clock.ok());
      delta = r.Clear(kSet, *clock);
    } else {
      REQUIRE(r.SweepSome(Uniform(rng, 1, 50)).ok());
      continue;
    }
    REQUIRE(delta.ok());
    for (int to = 0; to < 3; ++to) {
      if (to != n && Uniform(rng, 0, 2) != 0) pending.emplace_back(to, *delta);
    }
    // Deliver some, in random order; some are lost for ever.
    while (!pending.empty() && Uniform(rng, 0, 2) == 0) {
      const size_t k = Uniform(rng, 0, pending.size() - 1);
      auto [to, d] = pending[k];
      pending.erase(pending.begin() + static_cast<ptrdiff_t>(k));
      if (Uniform(rng, 0, 4) != 0) {
        REQUIRE(nodes[to]->replica->Apply(d).ok());
      }
    }
  }
  Replica& receiver = *nodes[1]->replica;
  const bool two_senders = Uniform(rng, 0, 1) == 0;
  std::vector<Transfer> transfers;
  transfers.push_back(Transfer{nodes[0]->replica.get(), nullptr, {}});
  if (two_senders) {
    transfers.push_back(Transfer{nodes[2]->replica.get(), nullptr, {}});
  }
  for (Transfer& t : transfers) t.Start(rng);
  // The expected value: the join of what each sender's transfer streams
  // (its snapshot) and what the receiver holds now.
  Clock expected_clock;
  Value expected = ValueOf(ReadAll(receiver, kSet, 1000, &expected_clock));
  for (Transfer& t : transfers) {
    Clock c;
    const Value v = ValueOf(ReadAll(*t.from, kSet, 1000, &c));
    REQUIRE(c == t.reader->clock());
    expected = Join(expected, expected_clock, v, c);
    expected_clock.Merge(c);
  }
  // Interleave the transfers' chunks; sometimes restart one from scratch
  // (a lost connection), with a new snapshot only if nothing changed.
  while (true) {
    std::vector<Transfer*> open;
    for (Transfer& t : transfers) {
      if (!t.done) open.push_back(&t);
    }
    if (open.empty()) break;
    Transfer& t = *open[Uniform(rng, 0, open.size() - 1)];
    if (Uniform(rng, 0, 15) == 0) {
      t.Start(rng);  // Senders do not change meanwhile: same snapshot.
      continue;
    }
    t.Step(receiver);
  }
  CAPTURE(two_senders);
  Clock got_clock;
  const Value got = ValueOf(ReadAll(receiver, kSet, 1000, &got_clock));
  CHECK(got == expected);
  CHECK(got_clock == expected_clock);
  auto report = receiver.Verify();
  REQUIRE(report.ok());
  CHECK(report->ok());
  // Sweeping removes covered keys and changes nothing visible.
  while (true) {
    auto p = receiver.SweepSome(1000);
    REQUIRE(p.ok());
    if (p->idle) break;
  }
  CHECK(ValueOf(ReadAll(receiver, kSet)) == expected);
  report = receiver.Verify();
  REQUIRE(report.ok());
  CHECK(report->ok());
}

TEST_CASE("transfer: the receiver ends with the join of the replicas") {
  for (uint64_t seed : Seeds(60)) {
    CAPTURE(seed);
    RunTransferModel(seed);
  }
}

TEST_CASE("transfer: a removed element is not resurrected") {
  Node a(0xA0), b(0xB0);
  UpdateOp add = UpdateOp::Add("x");
  auto d = a.replica->Update(kSet, std::span(&add, 1));
  REQUIRE(d.ok());
  REQUIRE(b.replica->Apply(*d).ok());  // b has x; it misses the remove.
  UpdateOp remove = UpdateOp::Remove("x", {*d->ops[0].add});
  REQUIRE(a.replica->Update(kSet, std::span(&remove, 1)).ok());
  UpdateOp add_y = UpdateOp::Add("y");
  auto dy = a.replica->Update(kSet, std::span(&add_y, 1));
  REQUIRE(dy.ok());
  // And a clear on a whose keys are not swept yet: z must not come back.
  UpdateOp add_z = UpdateOp::Add("z");
  REQUIRE(a.replica->Update(kSet, std::span(&add_z, 1)).ok());
  auto clock = a.replica->GetClock(kSet);
  REQUIRE(clock.ok());
  REQUIRE(a.replica->Clear(kSet, *clock).ok());
  REQUIRE(a.replica->Update(kSet, std::span(&add_y, 1)).ok());

  auto reader = a.replica->Read(kSet);
  REQUIRE(reader.ok());
  Clock tracker;
  std::vector<ElementDots> chunk;
  bool more = true;
  while (more) {
    auto next = (*reader)->Next(&chunk);
    REQUIRE(next.ok());
    more = *next;
    for (const ElementDots& e : chunk) CHECK(e.element == "y");
    REQUIRE(b.replica->ApplyTransferChunk(kSet, chunk, &tracker).ok());
  }
  REQUIRE(b.replica->FinishTransfer(kSet, (*reader)->clock(), tracker).ok());
  const auto got = ReadAll(*b.replica, kSet);
  REQUIRE(got.size() == 1);
  CHECK(got[0].element == "y");
  CHECK(b.replica->stats().sweep_queue_length == 1);
  auto report = b.replica->Verify();
  REQUIRE(report.ok());
  CHECK(report->ok());
}

TEST_CASE(
    "transfer: chunks and clocks claiming the receiver's own events "
    "are refused") {
  Node a(0xA0), b(0xB0);
  Clock tracker;
  std::vector<ElementDots> chunk = {{"x", {Dot{0xB0, 5}}}};
  CHECK(absl::IsInvalidArgument(
      b.replica->ApplyTransferChunk(kSet, chunk, &tracker)));
  CHECK(tracker.empty());
  Clock forged;
  forged.AddDot(Dot{0xB0, 9});
  CHECK(absl::IsInvalidArgument(
      b.replica->FinishTransfer(kSet, forged, tracker)));
  chunk = {{"x", {Dot{0xA0, 0}}}};
  CHECK(absl::IsInvalidArgument(
      b.replica->ApplyTransferChunk(kSet, chunk, &tracker)));
  CHECK(ReadAll(*b.replica, kSet).empty());
}

}  // namespace
}  // namespace bigset::testing
