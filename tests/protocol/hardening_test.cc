// Regression tests for the defects an adversarial review found in the
// cluster and replica layers, one named after each, and for the resource
// bounds and liveness properties that came with them. Most drive a
// ManualCluster, whose network and timers the test orders by hand, so that
// each runs the one order of events that exposed its defect.

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bigset/replica/replica.h"
#include "bigset/store/leveldb_store.h"
#include "bigset/testing/fault_env.h"
#include "bigset/testing/sim.h"
#include "core/coding.h"
#include "leveldb/env.h"
#include "leveldb/helpers/memenv.h"
#include "manual_cluster.h"
#include "net/message.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

// A ReadHandler that collects a read, asking for the next chunk at once
// unless told to hold.
struct Collect final : ReadHandler {
  void OnClock(const Clock& c) override { clock = c; }
  void OnChunk(std::vector<ElementDots>* e,
               std::function<void()> next) override {
    ++chunks;
    for (ElementDots& x : *e) elements.push_back(std::move(x));
    if (hold) {
      pending = std::move(next);
    } else {
      next();
    }
  }
  void OnDone(absl::Status s) override { status = s; }

  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    for (const ElementDots& e : elements) out.push_back(e.element);
    return out;
  }

  bool hold = false;
  std::function<void()> pending;
  int chunks = 0;
  Clock clock;
  std::vector<ElementDots> elements;
  std::optional<absl::Status> status;
};

std::vector<std::string> Numbered(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(absl::StrFormat("e%05d", i));
  return out;
}

// Adds `elements` to `set` through node `via` and settles the cluster.
void Load(ManualCluster& c, NodeId via, const std::string& set,
          const std::vector<std::string>& elements, int w = 3) {
  std::vector<UpdateOp> ops;
  for (const std::string& e : elements) ops.push_back(UpdateOp::Add(e));
  ClusterWriteOptions wo;
  wo.w = w;
  std::optional<absl::StatusOr<Delta>> done;
  c.node(via).Update(set, ops, wo,
                     [&](absl::StatusOr<Delta> d) { done = std::move(d); });
  c.Settle();
  REQUIRE(done.has_value());
  REQUIRE(done->ok());
}

TEST_CASE(
    "read: a local clock due after R remote clocks is not read from a released "
    "reader",
    "[regression]") {
  ManualCluster c(3, 3);
  Load(c, 1, "s", Numbered(20));
  Collect read;
  ClusterReadOptions ro;
  ro.batch_size = 4;
  c.node(1).Read("s", ro, &read);
  // The sockets are read before the timers: both remote clocks arrive
  // first, so the merge begins without the local replica and releases its
  // reader; only then does the local clock's zero-delay timer run.
  c.DeliverAll(And(From(1), OfType(MessageType::kRead)));
  c.DeliverAll(OfType(MessageType::kReadClock));
  c.RunTimers(1);
  c.Settle();
  REQUIRE(read.status.has_value());
  REQUIRE(read.status->ok());
  CHECK(read.Names() == Numbered(20));
}

TEST_CASE(
    "read: a malformed read chunk from a peer is dropped and asked for again",
    "[regression]") {
  ManualCluster c(3, 3);
  Load(c, 1, "s", Numbered(30));
  for (int variant = 0; variant < 3; ++variant) {
    CAPTURE(variant);
    Collect read;
    ClusterReadOptions ro;
    ro.batch_size = 5;
    ro.r = 3;
    c.node(1).Read("s", ro, &read);
    c.RunTimers(1);
    c.DeliverAll(OfType(MessageType::kRead));
    c.DeliverAll(OfType(MessageType::kReadClock));
    // Replace node 2's first chunk by a crafted one: its header is right
    // (request ids are predictable), its elements are not.
    bool replaced = false;
    for (ManualCluster::Sent& m : c.queue()) {
      if (m.from != 2 || m.type() != MessageType::kReadChunk) continue;
      MessageHeader h;
      std::string_view body;
      REQUIRE(ParseHeader(m.bytes, &h, &body).ok());
      std::string crafted;
      EncodeHeader(h, &crafted);
      coding::PutVarint64(&crafted, 0);  // seq
      crafted.push_back(0);              // not done
      if (variant == 0) {
        crafted.append("\x05garbage");  // 5 elements that are not there
      } else {
        // Well-formed elements that break the stream's order (variant 1:
        // descending; variant 2: an element without dots).
        std::vector<ElementDots> bad = {{"e00009", {Dot{7, 1}}},
                                        {"e00001", {Dot{7, 2}}}};
        if (variant == 2) bad = {{"e00001", {}}};
        std::string full;
        EncodeReadChunk(h, 0, false, bad, &full);
        std::string_view fbody;
        MessageHeader fh;
        REQUIRE(ParseHeader(full, &fh, &fbody).ok());
        crafted.resize(crafted.size() - 2);  // Drop seq and done again.
        crafted.append(fbody);
      }
      FinishMessage(0, &crafted);
      m.bytes = crafted;
      replaced = true;
      break;
    }
    REQUIRE(replaced);
    const uint64_t malformed =
        Stat(c.node(1).stats(), "node.malformed_messages");
    c.DeliverAll(To(1));
    CHECK(Stat(c.node(1).stats(), "node.malformed_messages") == malformed + 1);
    c.Settle();
    REQUIRE(read.status.has_value());
    REQUIRE(read.status->ok());
    CHECK(read.Names() == Numbered(30));
  }
}

TEST_CASE(
    "request ids: request ids never repeat across a restart whose clock went "
    "back",
    "[regression]") {
  ManualCluster c(4, 3);
  // A set whose preference list leaves out some node: that node's writes
  // are coordinated by a replica through kUpdate, whose replies are cached
  // by (sender, request id).
  std::string set;
  NodeId outsider = 0;
  for (int i = 0; outsider == 0; ++i) {
    set = absl::StrCat("set", i);
    const auto& pl = c.ring().PreferenceList(c.ring().PartitionOf(set));
    for (NodeId n : c.ring().nodes()) {
      if (std::find(pl.begin(), pl.end(), n) == pl.end()) outsider = n;
    }
  }
  auto write = [&](const std::string& element) {
    std::optional<absl::StatusOr<Delta>> done;
    c.node(outsider).Update(set, {UpdateOp::Add(element)}, {},
                            [&](absl::StatusOr<Delta> d) { done = d; });
    c.Settle();
    REQUIRE(done.has_value());
    REQUIRE(done->ok());
    REQUIRE((*done)->ops.size() == 1);
    return (*done)->ops[0].element;
  };
  CHECK(write("first") == "first");
  // A reboot: the monotonic clock starts again from the same value.
  c.Restart(outsider, c.Now(outsider));
  CHECK(write("second") == "second");
  std::optional<absl::StatusOr<Membership>> m;
  c.node(outsider).ContainsAll(set, {"first", "second"}, {},
                               [&](absl::StatusOr<Membership> r) { m = r; });
  c.Settle();
  REQUIRE(m.has_value());
  REQUIRE(m->ok());
  CHECK((*m)->all_present);
}

TEST_CASE("read: folds outlive their idle timeout while their read waits",
          "[regression]") {
  NodeOptions no;
  no.service.fold_idle_timeout_micros = 1'000'000;
  ManualCluster c(3, 3, 4, no);
  Load(c, 1, "s", Numbered(100));
  ClusterReadOptions ro;
  ro.batch_size = 10;
  ro.keepalive_micros = 300'000;
  ro.timeout_micros = 2'000'000;

  SECTION("a slow client") {
    Collect read;
    read.hold = true;
    c.node(1).Read("s", ro, &read);
    c.Settle();
    REQUIRE(read.chunks == 1);
    // The client holds its chunk for 5 s, five idle timeouts.
    for (int i = 0; i < 50; ++i) c.Advance(100'000);
    REQUIRE_FALSE(read.status.has_value());
    read.hold = false;
    read.pending();
    c.Settle();
    REQUIRE(read.status.has_value());
    REQUIRE(read.status->ok());
    CHECK(read.Names() == Numbered(100));
  }
  SECTION("a replica whose elements are past least_last") {
    // Replica 3 holds one more element, after all the others: its fold
    // waits while the others stream, slowly.
    std::optional<absl::StatusOr<Delta>> done;
    ClusterWriteOptions one;
    one.w = 1;
    c.node(3).Update("s", {UpdateOp::Add("zzz")}, one,
                     [&](absl::StatusOr<Delta> d) { done = d; });
    c.Drop(OfType(MessageType::kReplicate));
    c.Settle();
    REQUIRE(done.has_value());
    Collect read;
    ClusterReadOptions all = ro;
    all.r = 3;
    all.read_repair = false;
    c.node(1).Read("s", all, &read);
    for (int i = 0; i < 200 && !read.status.has_value(); ++i) {
      c.Advance(100'000);
    }
    REQUIRE(read.status.has_value());
    REQUIRE(read.status->ok());
    CHECK(read.elements.size() == 101);
  }
}

TEST_CASE("read: a chunk that overtakes its clock is kept, not dropped",
          "[regression]") {
  ManualCluster c(3, 3);
  Load(c, 1, "s", Numbered(10));
  Collect read;
  ClusterReadOptions ro;
  ro.r = 3;
  ro.retry_micros = 200'000;
  c.node(1).Read("s", ro, &read);
  c.RunTimers(1);
  c.DeliverAll(OfType(MessageType::kRead));
  // Each replica's first chunk arrives before its clock.
  c.DeliverAll(OfType(MessageType::kReadChunk));
  c.DeliverAll(OfType(MessageType::kReadClock));
  c.Settle();
  // Done without a retry: no time passed.
  REQUIRE(read.status.has_value());
  REQUIRE(read.status->ok());
  CHECK(read.Names() == Numbered(10));
  CHECK(Stat(c.node(1).stats(), "node.retransmits") == 0);
}

TEST_CASE("query: ContainsAll with notfound_ok off answers like Read",
          "[regression]") {
  ManualCluster c(3, 3);
  ClusterReadOptions strict;
  strict.notfound_ok = false;
  auto query = [&](const std::string& set) {
    std::optional<absl::StatusOr<Membership>> m;
    c.node(1).ContainsAll(set, {"a", "b"}, strict,
                          [&](absl::StatusOr<Membership> r) { m = r; });
    c.Settle();
    REQUIRE(m.has_value());
    return *m;
  };
  // A set no replica holds.
  auto missing = query("missing");
  REQUIRE(missing.ok());
  CHECK_FALSE(missing->all_present);
  CHECK(missing->elements[0].dots.empty());
  // A set only one replica of three holds.
  std::optional<absl::StatusOr<Delta>> done;
  ClusterWriteOptions one;
  one.w = 1;
  c.node(2).Update("lonely", {UpdateOp::Add("a")}, one,
                   [&](absl::StatusOr<Delta> d) { done = d; });
  c.Drop(OfType(MessageType::kReplicate));
  c.Settle();
  REQUIRE(done.has_value());
  auto lonely = query("lonely");
  REQUIRE(lonely.ok());
  CHECK(lonely->elements[0].dots.size() == 1);
  CHECK(lonely->elements[1].dots.empty());
}

TEST_CASE(
    "replica: after a power loss a replica takes a new actor and never reuses "
    "a counter",
    "[regression]") {
  std::unique_ptr<leveldb::Env> mem(
      leveldb::NewMemEnv(leveldb::Env::Default()));
  FaultEnv env(mem.get());
  LevelDbStoreOptions so;
  so.env = &env;
  MemStore peer_store;
  ReplicaOptions po;
  po.keyspace = 2;
  auto peer = Replica::Open(peer_store.store.get(), po);
  REQUIRE(peer.ok());

  ActorId first_actor = 0;
  Dot first_dot;
  {
    auto store = LevelDbStore::Open("/power", so);
    REQUIRE(store.ok());
    auto r = Replica::Open(store->get(), ReplicaOptions());
    REQUIRE(r.ok());
    first_actor = (*r)->actor();
    UpdateOp add = UpdateOp::Add("a");
    auto d = (*r)->Update("s", std::span(&add, 1));
    REQUIRE(d.ok());
    first_dot = *d->ops[0].add;
    REQUIRE((*peer)->Apply(*d).ok());  // The peer saw it...
    // ...and the machine loses power: no Close, the unsynced tail is gone.
  }
  auto lost = env.DropUnsynced("/power/");
  REQUIRE(lost.ok());
  CHECK(*lost > 0);
  auto store = LevelDbStore::Open("/power", so);
  REQUIRE(store.ok());
  auto r = Replica::Open(store->get(), ReplicaOptions());
  REQUIRE(r.ok());
  CHECK((*r)->started_new_epoch());
  CHECK((*r)->actor() != first_actor);
  UpdateOp add = UpdateOp::Add("b");
  auto d = (*r)->Update("s", std::span(&add, 1));
  REQUIRE(d.ok());
  CHECK(*d->ops[0].add != first_dot);
  REQUIRE((*peer)->Apply(*d).ok());
  // The peer holds both elements: no counter named two events.
  auto a = (*peer)->Contains("s", "a");
  auto b = (*peer)->Contains("s", "b");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->size() == 1);
  CHECK(b->size() == 1);
  // A clean shutdown keeps the actor.
  ActorId second = (*r)->actor();
  REQUIRE((*r)->Close().ok());
  r->reset();
  auto again = Replica::Open(store->get(), ReplicaOptions());
  REQUIRE(again.ok());
  CHECK((*again)->actor() == second);
  CHECK_FALSE((*again)->started_new_epoch());
}

TEST_CASE("write: writes to more than 32 replicas are acknowledged",
          "[regression]") {
  SimOptions o;
  o.nodes = 40;
  o.ring.ring_size = 4;
  o.ring.n = 40;
  o.min_latency_micros = o.max_latency_micros = 10;
  auto sim = Simulator::Create(o);
  REQUIRE(sim.ok());
  ClusterWriteOptions all;
  all.w = 40;
  auto d = (*sim)->Update(1, "wide", {UpdateOp::Add("x")}, all);
  REQUIRE(d.ok());
  ClusterReadOptions ro;
  ro.r = 40;
  auto read = (*sim)->Read(7, "wide", ro);
  REQUIRE(read.ok());
  CHECK(read->elements.size() == 1);
  RingOptions too_big;
  too_big.ring_size = kMaxRingSize + 1;
  CHECK(Ring::Create({1}, too_big).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE(
    "replica: a context claiming events a replica never generated is refused "
    "and blocks nothing",
    "[regression]") {
  MemStore mem;
  ReplicaOptions ro;
  ro.keyspace = 1;
  auto r = Replica::Open(mem.store.get(), ro);
  REQUIRE(r.ok());
  UpdateOp add = UpdateOp::Add("x");
  REQUIRE((*r)->Update("s", std::span(&add, 1)).ok());
  const Dot bogus{(*r)->actor(), UINT64_MAX};
  // At the coordinator: InvalidArgument, nothing changed.
  UpdateOp bad = UpdateOp::Remove("x", {bogus});
  auto refused = (*r)->Update("s", std::span(&bad, 1));
  CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
  // In a delta from a peer: refused whole and counted.
  Delta d;
  d.set = "s";
  d.ops.push_back(DeltaOp{"x", {bogus}, std::nullopt});
  CHECK((*r)->Apply(d).code() == absl::StatusCode::kInvalidArgument);
  Delta add_bogus;
  add_bogus.set = "s";
  add_bogus.ops.push_back(DeltaOp{"y", {}, Dot{(*r)->actor(), 99}});
  CHECK((*r)->Apply(add_bogus).code() == absl::StatusCode::kInvalidArgument);
  CHECK((*r)->stats().deltas_rejected == 2);
  Clock clear;
  clear.AddDot(bogus);
  CHECK((*r)->Clear("s", clear).status().code() ==
        absl::StatusCode::kInvalidArgument);
  // Adds go on, and x is still there.
  UpdateOp add2 = UpdateOp::Add("z");
  auto ok = (*r)->Update("s", std::span(&add2, 1));
  REQUIRE(ok.ok());
  CHECK(ok->ops[0].add->counter == 2);
  auto x = (*r)->Contains("s", "x");
  REQUIRE(x.ok());
  CHECK(x->size() == 1);

  // Over a cluster: a client sends such a context for every replica's
  // actor; every later add still succeeds everywhere.
  SimOptions o;
  o.nodes = 3;
  auto sim = Simulator::Create(o);
  REQUIRE(sim.ok());
  REQUIRE((*sim)->Update(1, "t", {UpdateOp::Add("a")}).ok());
  const uint32_t p = (*sim)->ring().PartitionOf("t");
  std::vector<Dot> ctx;
  for (NodeId n : (*sim)->ring().PreferenceList(p)) {
    ctx.push_back(Dot{(*sim)->node(n)->LocalReplica(p)->actor(), UINT64_MAX});
  }
  std::sort(ctx.begin(), ctx.end());
  auto bad_write = (*sim)->Update(1, "t", {UpdateOp::Remove("a", ctx)});
  CHECK(bad_write.status().code() == absl::StatusCode::kInvalidArgument);
  for (NodeId via : (*sim)->node_ids()) {
    ClusterWriteOptions all;
    all.w = 3;
    CHECK((*sim)
              ->Update(via, "t", {UpdateOp::Add(absl::StrCat("b", via))}, all)
              .ok());
  }
}

TEST_CASE(
    "replica: ops of one Update apply in order, also with contexts from the "
    "replica",
    "[regression]") {
  MemStore mem;
  auto r = Replica::Open(mem.store.get(), ReplicaOptions());
  REQUIRE(r.ok());
  // Add then remove x in one call: x is absent.
  UpdateOp remove = UpdateOp::Remove("x", {});
  remove.context_from_replica = true;
  std::vector<UpdateOp> ops = {UpdateOp::Add("x"), remove};
  auto d = (*r)->Update("s", ops);
  REQUIRE(d.ok());
  REQUIRE(d->ops[1].context.size() == 1);
  CHECK(d->ops[1].context[0] == *d->ops[0].add);
  auto x = (*r)->Contains("s", "x");
  REQUIRE(x.ok());
  CHECK(x->empty());
  // Add x twice, the second replacing the first: one dot.
  UpdateOp again = UpdateOp::Add("y");
  again.context_from_replica = true;
  std::vector<UpdateOp> twice = {UpdateOp::Add("y"), again};
  REQUIRE((*r)->Update("s", twice).ok());
  auto y = (*r)->Contains("s", "y");
  REQUIRE(y.ok());
  CHECK(y->size() == 1);
  // A remove, then an add taking its context from the replica: the removed
  // dot is not in the add's context twice, and the add survives.
  UpdateOp readd = UpdateOp::Add("y");
  readd.context_from_replica = true;
  UpdateOp rm = UpdateOp::Remove("y", {});
  rm.context_from_replica = true;
  std::vector<UpdateOp> seq = {rm, readd};
  auto d2 = (*r)->Update("s", seq);
  REQUIRE(d2.ok());
  CHECK(d2->ops[1].context.empty());
  y = (*r)->Contains("s", "y");
  REQUIRE(y.ok());
  CHECK(y->size() == 1);
}

// ---- Resource bounds and liveness.

TEST_CASE(
    "bounds: a read chunk is capped in elements and bytes, whatever "
    "batch size a peer asks for") {
  NodeOptions no;
  no.service.max_chunk_elements = 50;
  no.handoff.chunk_elements = 50;
  no.anti_entropy.chunk_elements = 50;
  no.service.max_chunk_bytes = 4000;
  no.handoff.chunk_bytes = 4000;
  no.anti_entropy.chunk_bytes = 4000;
  ManualCluster c(3, 3, 4, no);
  Load(c, 1, "s", Numbered(300));
  // An element with 1,000 dots (concurrent adds).
  for (int i = 0; i < 10; ++i) {
    std::vector<UpdateOp> adds(100, UpdateOp::Add("e00150x"));
    std::optional<absl::StatusOr<Delta>> done;
    c.node(1).Update("s", adds, {}, [&](absl::StatusOr<Delta> d) { done = d; });
    c.Settle();
    REQUIRE(done.has_value());
  }
  // A peer (node 1, by hand) asks node 2 for chunks of 2^32 - 1 elements.
  msg::Read read;
  read.set = "s";
  read.batch_size = UINT32_MAX;
  c.node(2).Receive(1, EncodeMessage(4242, c.ring().PartitionOf("s"), read));
  size_t total = 0;
  bool saw_big = false;
  for (uint64_t seq = 0;; ++seq) {
    std::optional<std::string> chunk;
    for (auto& m : c.queue()) {
      if (m.from == 2 && m.type() == MessageType::kReadChunk) chunk = m.bytes;
    }
    c.queue().clear();
    REQUIRE(chunk.has_value());
    MessageHeader h;
    std::string_view body, elements;
    uint64_t got_seq = 0;
    bool done = false;
    REQUIRE(ParseHeader(*chunk, &h, &body).ok());
    REQUIRE(ParseReadChunkBody(body, &got_seq, &done, &elements).ok());
    std::vector<ElementDots> es;
    REQUIRE(DecodeChunkElements(elements, &es).ok());
    CHECK(got_seq == seq);
    CHECK(es.size() <= 50);
    // The chunk stops once it reaches the byte bound: everything but its
    // last element stays under it (an element alone may exceed it).
    size_t before_last = 0;
    for (size_t i = 0; i + 1 < es.size(); ++i) {
      before_last += es[i].element.size() + 16 * es[i].dots.size();
    }
    CHECK(before_last < 4000);
    for (const ElementDots& e : es) {
      if (e.dots.size() == 1000) {
        saw_big = true;
        CHECK(es.size() <= 2);  // It fills a chunk by its size.
      }
    }
    total += es.size();
    if (done) break;
    c.node(2).Receive(
        1, EncodeMessage(4242, h.partition, msg::ChunkAck{.seq = seq + 1}));
  }
  CHECK(total == 301);
  CHECK(saw_big);
}

TEST_CASE("bounds: the update reply cache is bounded in bytes") {
  NodeOptions no;
  no.service.reply_cache_bytes = 64 << 10;
  ManualCluster c(4, 3, 4, no);
  // Writes from a node outside the set's preference list go through
  // kUpdate, whose replies are cached.
  std::string set;
  NodeId outsider = 0;
  for (int i = 0; outsider == 0; ++i) {
    set = absl::StrCat("set", i);
    const auto& pl = c.ring().PreferenceList(c.ring().PartitionOf(set));
    for (NodeId n : c.ring().nodes()) {
      if (std::find(pl.begin(), pl.end(), n) == pl.end()) outsider = n;
    }
  }
  for (int i = 0; i < 200; ++i) {
    std::vector<UpdateOp> ops;
    for (int k = 0; k < 100; ++k) {
      ops.push_back(UpdateOp::Add(absl::StrCat("element-", i, "-", k)));
    }
    std::optional<absl::StatusOr<Delta>> done;
    c.node(outsider).Update(set, ops, {},
                            [&](absl::StatusOr<Delta> d) { done = d; });
    c.Settle();
    REQUIRE(done.has_value());
    REQUIRE(done->ok());
  }
  uint64_t cached = 0;
  for (NodeId n : c.ring().nodes()) {
    cached =
        std::max(cached, Stat(c.node(n).stats(), "service.reply_cache_bytes"));
  }
  CHECK(cached > 0);
  CHECK(cached <= (64 << 10) + 8000);  // The budget, plus the newest reply.
}

TEST_CASE(
    "bounds: a clock that arrives after the merge began stops its fold "
    "at once") {
  ManualCluster c(3, 3);
  Load(c, 1, "s", Numbered(50));
  Collect read;
  read.hold = true;  // The read stays open.
  ClusterReadOptions ro;
  ro.batch_size = 5;
  c.node(1).Read("s", ro, &read);
  c.RunTimers(1);  // The local clock: one of R = 2.
  c.DeliverAll(OfType(MessageType::kRead));
  c.DeliverOne(And(From(2), OfType(MessageType::kReadClock)));  // R = 2.
  c.DeliverAll(From(2));
  c.DeliverAll(And(From(1), To(2)));
  REQUIRE(Stat(c.node(3).stats(), "service.folds_open") == 1);
  // Node 3's clock comes late: its fold is stopped at once.
  c.DeliverAll(From(3));
  c.DeliverAll(And(From(1), To(3)));
  CHECK(Stat(c.node(3).stats(), "service.folds_open") == 0);
  CHECK_FALSE(read.status.has_value());
  read.hold = false;
  read.pending();
  c.Settle();
  REQUIRE(read.status.has_value());
  CHECK(read.status->ok());
}

TEST_CASE("liveness: a read survives the loss of a replica at any point") {
  for (int crash_after_chunks = 0; crash_after_chunks < 8;
       crash_after_chunks += 3) {
    CAPTURE(crash_after_chunks);
    SimOptions o;
    o.seed = 11 + crash_after_chunks;
    o.nodes = 3;
    auto created = Simulator::Create(o);
    REQUIRE(created.ok());
    Simulator& sim = **created;
    std::vector<UpdateOp> ops;
    for (const std::string& e : Numbered(500)) ops.push_back(UpdateOp::Add(e));
    ClusterWriteOptions all;
    all.w = 3;
    REQUIRE(sim.Update(1, "big", ops, all).ok());
    // Read through node 1, which merges its own replica with one other; the
    // other dies mid-stream.
    Collect read;
    read.hold = true;
    ClusterReadOptions ro;
    ro.batch_size = 20;
    ro.read_repair = false;
    sim.node(1)->Read("big", ro, &read);
    sim.RunUntil([&] { return read.chunks > 0 || read.status.has_value(); });
    for (int i = 0; i < crash_after_chunks && !read.status.has_value(); ++i) {
      const int chunks = read.chunks;
      auto next = std::move(read.pending);
      next();
      sim.RunUntil([&] { return read.chunks > chunks || read.status; });
    }
    // Kill whichever remote replica is serving a fold now.
    NodeId victim = 0;
    for (NodeId n : {NodeId{2}, NodeId{3}}) {
      if (Stat(sim.node(n)->stats(), "service.folds_open") > 0) victim = n;
    }
    REQUIRE(victim != 0);
    REQUIRE(sim.Crash(victim).ok());
    read.hold = false;
    if (read.pending) read.pending();
    REQUIRE(sim.RunUntil([&] { return read.status.has_value(); }));
    REQUIRE(read.status->ok());
    CHECK(read.Names() == Numbered(500));
    CHECK(Stat(sim.node(1)->stats(), "read.replica_switches") >= 1);
  }
}

TEST_CASE(
    "a full disk at any write loses no acknowledged update, and the replica "
    "refuses writes until reopened") {
  // The disk fills at a random point of a random workload; the replica
  // is then closed (not cleanly: the close's write fails too) and reopened
  // with space again. Every acknowledged add and remove holds after the
  // reopen, and no write is acknowledged between the failure and it.
  for (uint64_t seed : testing::Seeds(6)) {
    CAPTURE(seed);
    testing::Rng rng(seed);
    std::unique_ptr<leveldb::Env> mem(
        leveldb::NewMemEnv(leveldb::Env::Default()));
    FaultEnv env(mem.get());
    LevelDbStoreOptions so;
    so.env = &env;
    // Per element: present after its last acknowledged update, or unknown
    // (its last update failed: it may or may not have landed).
    enum class Known { kPresent, kAbsent, kUnknown };
    std::map<std::string, Known> model;
    const int fill_at = int(testing::Uniform(rng, 5, 200));
    const int free_at = fill_at + int(testing::Uniform(rng, 1, 60));
    bool failed = false;
    {
      auto store = LevelDbStore::Open("/disk", so);
      REQUIRE(store.ok());
      auto r = Replica::Open(store->get(), ReplicaOptions());
      REQUIRE(r.ok());
      for (int op = 0; op < 300; ++op) {
        if (op == fill_at) {
          env.FillDiskAfter("/disk/", testing::Uniform(rng, 0, 300));
        }
        // Room again while the replica runs (a file deleted): writes
        // logged now would follow a part-written record.
        if (op == free_at) env.FreeSpace("/disk/");
        const std::string e =
            "e" + std::to_string(testing::Uniform(rng, 0, 40));
        absl::StatusOr<Delta> d;
        bool add = testing::Uniform(rng, 0, 3) != 0;
        if (add) {
          UpdateOp u = UpdateOp::Add(e);
          d = (*r)->Update("s", std::span(&u, 1));
        } else {
          auto dots = (*r)->Contains("s", e);
          REQUIRE(dots.ok());           // Reads go on after a failed write.
          if (dots->empty()) continue;  // Nothing to write.
          UpdateOp u = UpdateOp::Remove(e, *dots);
          d = (*r)->Update("s", std::span(&u, 1));
        }
        if (d.ok()) {
          INFO("op " << op);
          REQUIRE_FALSE(failed);  // Nothing acknowledged after a failure.
          model[e] = add ? Known::kPresent : Known::kAbsent;
        } else {
          failed = true;
          model[e] = Known::kUnknown;
        }
      }
      env.FreeSpace("/disk/");
      (void)(*r)->Close();  // Fails after a failed write: not a clean close.
    }
    CHECK(failed == (fill_at < 300));
    auto store = LevelDbStore::Open("/disk", so);
    REQUIRE(store.ok());
    auto r = Replica::Open(store->get(), ReplicaOptions());
    REQUIRE(r.ok());
    auto verify = (*r)->Verify();
    REQUIRE(verify.ok());
    CHECK(verify->ok());
    std::set<std::string> present;
    for (const ElementDots& ed : testing::ReadAllCounted(**r, "s")) {
      present.insert(ed.element);
    }
    for (const auto& [e, known] : model) {
      CAPTURE(e);
      if (known == Known::kPresent) CHECK(present.count(e) == 1);
      if (known == Known::kAbsent) CHECK(present.count(e) == 0);
    }
    UpdateOp u = UpdateOp::Add("after");
    CHECK((*r)->Update("s", std::span(&u, 1)).ok());
  }
}

TEST_CASE(
    "node: Node::Close answered no request still running (a read's handler, "
    "ReadAndWait, waited forever)",
    "[regression]") {
  ManualCluster c(3, 3);
  Load(c, 1, "s", Numbered(10));
  // Requests on node 1 that need the other replicas: none can finish while
  // their messages stay queued.
  ClusterWriteOptions w3;
  w3.w = 3;
  ClusterReadOptions r3;
  r3.r = 3;
  std::vector<std::string> order;
  std::map<std::string, std::vector<absl::Status>> answers;
  auto note = [&](const std::string& what, const absl::Status& s) {
    order.push_back(what);
    answers[what].push_back(s);
  };
  // A write that replied already (W = 1) and goes on replicating: it must
  // not be answered twice.
  ClusterWriteOptions w1;
  w1.w = 1;
  c.node(1).Update("s", {UpdateOp::Add("w1")}, w1,
                   [&](absl::StatusOr<Delta> d) { note("w1", d.status()); });
  c.RunTimers(1);
  REQUIRE(answers["w1"].size() == 1);
  REQUIRE(answers["w1"][0].ok());
  order.clear();

  std::optional<absl::Status> refused_in_callback, nested_close;
  c.node(1).Update("s", {UpdateOp::Add("w3")}, w3,
                   [&](absl::StatusOr<Delta> d) {
                     note("update", d.status());
                     // Close is still running: not "closed, OK" yet.
                     nested_close = c.node(1).Close();
                     // A callback that retries on the closing node is
                     // refused at once (no recursion, no new coordinator).
                     c.node(1).Update("s", {UpdateOp::Add("again")}, w3,
                                      [&](absl::StatusOr<Delta> again) {
                                        refused_in_callback = again.status();
                                      });
                   });
  // Decided within Update (W = 1, the local replica), due from the
  // scheduler, whose timer has not run: its answer stands.
  std::optional<absl::StatusOr<Delta>> decided;
  c.node(1).Update("s", {UpdateOp::Add("decided")}, w1,
                   [&](absl::StatusOr<Delta> d) {
                     note("decided", d.status());
                     decided = std::move(d);
                   });
  // A clear of nothing: answered with its empty delta.
  c.node(1).Clear("s", Clock(), w3,
                  [&](absl::StatusOr<Delta> d) { note("clear0", d.status()); });
  Collect read;
  c.node(1).Read("s", r3, &read);
  c.node(1).ContainsAll("s", {"e00001"}, r3, [&](absl::StatusOr<Membership> m) {
    note("contains", m.status());
  });
  c.node(1).Count(
      "s", r3, [&](absl::StatusOr<uint64_t> n) { note("count", n.status()); });
  RangeQuery q;
  q.limit = 3;
  c.node(1).Range("s", q, r3, [&](absl::StatusOr<RangeResult> r) {
    note("range", r.status());
  });
  REQUIRE(answers.size() == 1);  // Only w1 so far.
  REQUIRE_FALSE(read.status.has_value());

  REQUIRE(c.node(1).Close().ok());

  // Each answered exactly once: the clear of nothing first, then the
  // coordinators in the order they started; the decided write with its
  // delta, the others Unavailable.
  CHECK(order == std::vector<std::string>{"clear0", "update", "decided",
                                          "contains", "count", "range"});
  for (const char* what : {"update", "contains", "count", "range"}) {
    CAPTURE(what);
    REQUIRE(answers[what].size() == 1);
    CHECK(absl::IsUnavailable(answers[what][0]));
  }
  REQUIRE(answers["clear0"].size() == 1);
  CHECK(answers["clear0"][0].ok());
  REQUIRE(decided.has_value());
  REQUIRE(decided->ok());
  REQUIRE((*decided)->ops.size() == 1);
  CHECK((*decided)->ops[0].element == "decided");
  CHECK(answers["w1"].size() == 1);
  REQUIRE(read.status.has_value());
  CHECK(absl::IsUnavailable(*read.status));
  REQUIRE(refused_in_callback.has_value());
  CHECK(absl::IsFailedPrecondition(*refused_in_callback));
  REQUIRE(nested_close.has_value());
  CHECK(absl::IsFailedPrecondition(*nested_close));

  // After Close: requests are refused at once, messages and timers do
  // nothing, and Close again is a no-op.
  std::optional<absl::Status> late;
  c.node(1).Update("s", {UpdateOp::Add("late")}, w3,
                   [&](absl::StatusOr<Delta> d) { late = d.status(); });
  REQUIRE(late.has_value());
  CHECK(absl::IsFailedPrecondition(*late));
  Collect late_read;
  c.node(1).Read("s", r3, &late_read);
  REQUIRE(late_read.status.has_value());
  CHECK(absl::IsFailedPrecondition(*late_read.status));
  CHECK(absl::IsFailedPrecondition(c.node(1).InstallRing(c.ring())));
  std::optional<absl::Status> late_clear;
  c.node(1).Clear("s", Clock(), w3,
                  [&](absl::StatusOr<Delta> d) { late_clear = d.status(); });
  REQUIRE(late_clear.has_value());
  CHECK(absl::IsFailedPrecondition(*late_clear));
  c.Advance(60'000'000, 3);
  CHECK(c.node(1).Close().ok());
  CHECK(order.size() == 6);
  CHECK(answers["w1"].size() == 1);
}

TEST_CASE(
    "write: a write whose deadline callback closes the node ran on after Close "
    "destroyed it",
    "[regression]") {
  // At its deadline the write answers the client, then counts, leaves
  // hints and ends: on itself. A client that closes the node from that
  // answer destroys it first (ASan: heap-use-after-free without the check).
  ManualCluster c(3, 3);
  ClusterWriteOptions w3;
  w3.w = 3;
  w3.timeout_micros = 1'000'000;
  std::optional<absl::Status> answer, closed;
  c.node(1).Update("s", {UpdateOp::Add("x")}, w3, [&](absl::StatusOr<Delta> d) {
    answer = d.status();
    closed = c.node(1).Close();
  });
  const auto all = [](const ManualCluster::Sent&) { return true; };
  for (int i = 0; i < 100 && !answer.has_value(); ++i) {
    c.Drop(all);  // The other replicas never answer.
    c.Tick(100'000);
    c.RunTimers(1);
  }
  REQUIRE(answer.has_value());
  CHECK(absl::IsDeadlineExceeded(*answer));
  REQUIRE(closed.has_value());
  CHECK(closed->ok());
  CHECK(c.node(1).Close().ok());
}

}  // namespace
}  // namespace bigset::testing
