// bigset_demo: a simulated 5-node cluster (N=3, W=2, R=2) that loads a
// 1,000,000-element set, streams it back, runs membership and range
// queries, crashes a node and keeps reading and writing, then restarts it
// and lets read repair converge it. Then the cluster grows to 6 nodes and
// shrinks back to 5 while a writer keeps adding (hand-off), and every
// acknowledged element is checked. Last, a replica misses writes while it
// is down and converges by anti-entropy, with no read.
//
// Usage: bigset_demo [elements]   (default 1000000)
// The nodes' LevelDB stores live in a fresh temporary directory.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "bigset/testing/sim.h"

namespace {

// A node counter by name (bigset/cluster/node_stats.h lists them).
uint64_t Counter(const bigset::NodeStats& stats, std::string_view name) {
  uint64_t value = 0;
  if (!stats.Get(name, &value)) {
    std::fprintf(stderr, "no node counter named %.*s\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  return value;
}

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

std::string Item(uint64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "item-%07llu",
                static_cast<unsigned long long>(i));
  return buf;
}

int Fail(const char* what, const absl::Status& s) {
  std::fprintf(stderr, "%s failed: %s\n", what,
               std::string(s.ToString()).c_str());
  return 1;
}

// Streams a set through a ReadHandler, counting and checking the order.
class CountingReader final : public bigset::ReadHandler {
 public:
  void OnClock(const bigset::Clock& clock) override {
    clock_dots = clock.DotCount();
  }
  void OnChunk(std::vector<bigset::ElementDots>* elements,
               std::function<void()> next) override {
    for (const auto& e : *elements) {
      if (e.element <= last) ordered = false;
      last = e.element;
      ++count;
    }
    next();  // Ask for the next chunk: back-pressure is the caller's.
  }
  void OnDone(absl::Status s) override {
    status = s;
    done = true;
  }

  uint64_t clock_dots = 0;
  uint64_t count = 0;
  std::string last;
  bool ordered = true;
  bool done = false;
  absl::Status status;
};

// Whether every node runs `epoch` with nothing left to move or release.
bool Settled(bigset::Simulator& sim, uint64_t epoch) {
  for (bigset::NodeId id = 1; id <= sim.node_count(); ++id) {
    bigset::Node* node = sim.node(id);
    if (node == nullptr) continue;
    const auto s = node->stats();
    if (Counter(s, "handoff.ring_epoch") != epoch ||
        Counter(s, "handoff.partitions_moving") != 0 ||
        Counter(s, "handoff.pending") != 0 ||
        Counter(s, "handoff.running") != 0 ||
        Counter(s, "handoff.partitions_releasing") != 0) {
      return false;
    }
  }
  return true;
}

// Installs a ring of `nodes` on every node and keeps a writer adding
// elements ("grow-N", N from *next) until every transfer is done, printing
// the hand-off's progress. Returns the elements it got acknowledged.
absl::StatusOr<std::vector<std::string>> ChangeMembership(
    bigset::Simulator& sim, std::vector<bigset::NodeId> nodes,
    const std::string& set, uint64_t* next) {
  bigset::RingOptions ro;
  ro.ring_size = sim.ring().ring_size();
  ro.n = sim.ring().n();
  ro.placement = sim.ring().placement();
  ro.epoch = sim.ring().epoch() + 1;
  absl::StatusOr<bigset::Ring> ring = bigset::Ring::Create(nodes, ro);
  if (!ring.ok()) return ring.status();
  if (auto s = sim.InstallRing(*ring); !s.ok()) return s;
  std::printf("ring epoch %llu: %zu nodes; partitions moving:",
              static_cast<unsigned long long>(ro.epoch), nodes.size());
  for (bigset::NodeId id = 1; id <= sim.node_count(); ++id) {
    if (sim.node(id) != nullptr) {
      std::printf(" node %u: %llu", id,
                  static_cast<unsigned long long>(Counter(
                      sim.node(id)->stats(), "handoff.partitions_moving")));
    }
  }
  std::printf("\n");
  std::vector<std::string> acked;
  auto t = Clock::now();
  double last_print = -1;
  for (int round = 0; !Settled(sim, ro.epoch); ++round) {
    // The writer: 50 adds through a rotating coordinator, then a little
    // virtual time for the transfers.
    std::vector<bigset::UpdateOp> ops;
    std::vector<std::string> batch;
    for (int i = 0; i < 50; ++i) {
      batch.push_back("grow-" + std::to_string((*next)++));
      ops.push_back(bigset::UpdateOp::Add(batch.back()));
    }
    const bigset::NodeId via = nodes[round % nodes.size()];
    if (sim.Update(via, set, std::move(ops)).ok()) {
      acked.insert(acked.end(), batch.begin(), batch.end());
    }
    // Releases (bounded delete batches on a timer) run on after the last
    // transfer: more virtual time per round then.
    bool moving = false;
    for (bigset::NodeId id = 1; id <= sim.node_count(); ++id) {
      if (sim.node(id) != nullptr) {
        moving = moving || Counter(sim.node(id)->stats(),
                                   "handoff.partitions_moving") != 0;
      }
    }
    sim.RunFor(moving ? 20'000 : 500'000);
    if (Seconds(t) - last_print >= 0.5 || Settled(sim, ro.epoch)) {
      last_print = Seconds(t);
      uint64_t done = 0, running = 0, sent = 0, received = 0, released = 0;
      for (bigset::NodeId id = 1; id <= sim.node_count(); ++id) {
        if (sim.node(id) == nullptr) continue;
        const auto s = sim.node(id)->stats();
        done += Counter(s, "handoff.done");
        running += Counter(s, "handoff.running");
        sent += Counter(s, "handoff.keys_sent");
        received += Counter(s, "handoff.keys_received");
        released += Counter(s, "handoff.keys_released");
      }
      std::printf(
          "  %5.1f s: transfers done %3llu, running %llu; keys sent %8llu, "
          "received %8llu, released %8llu; writer acked %llu\n",
          Seconds(t), static_cast<unsigned long long>(done),
          static_cast<unsigned long long>(running),
          static_cast<unsigned long long>(sent),
          static_cast<unsigned long long>(received),
          static_cast<unsigned long long>(released),
          static_cast<unsigned long long>(acked.size()));
      std::fflush(stdout);
    }
  }
  return acked;
}

uint64_t LocalCount(bigset::Simulator& sim, bigset::NodeId node,
                    const std::string& set) {
  uint32_t p = sim.ring().PartitionOf(set);
  auto count = sim.node(node)->LocalReplica(p)->Count(set);
  return count.ok() ? *count : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  const std::string set = "big";
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "bigset_cluster_demo";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  bigset::SimOptions options;
  options.seed = 2026;
  options.nodes = 5;
  options.ring.epoch = 1;
  // Rendezvous placement: a node that joins or leaves moves about 1/6 of
  // the partitions (round robin would move most of them).
  options.ring.placement = bigset::Placement::kRendezvous;
  options.directory = dir.string();
  options.min_latency_micros = 200;  // Virtual time: costs nothing real.
  options.max_latency_micros = 1500;
  options.trace_capacity = 0;
  auto created = bigset::Simulator::Create(options);
  if (!created.ok()) return Fail("creating the cluster", created.status());
  bigset::Simulator& sim = **created;
  const uint32_t partition = sim.ring().PartitionOf(set);
  const auto& pl = sim.ring().PreferenceList(partition);
  std::printf("cluster: 5 nodes, ring of %u partitions, N=3 W=2 R=2\n",
              sim.ring().ring_size());
  std::printf("set \"%s\" lives in partition %u on nodes %u, %u, %u\n\n",
              set.c_str(), partition, pl[0], pl[1], pl[2]);

  // 1. Load.
  auto t = Clock::now();
  const uint64_t batch = 1000;
  for (uint64_t i = 0; i < n; i += batch) {
    std::vector<bigset::UpdateOp> ops;
    for (uint64_t j = i; j < std::min(n, i + batch); ++j) {
      ops.push_back(bigset::UpdateOp::Add(Item(j)));
    }
    auto d = sim.Update(1 + (i / batch) % 5, set, std::move(ops));
    if (!d.ok()) return Fail("loading", d.status());
    if ((i + batch) % 100000 == 0 || i + batch >= n) {
      std::printf("  loaded %8llu elements  (%.1f s)\n",
                  static_cast<unsigned long long>(std::min(n, i + batch)),
                  Seconds(t));
      std::fflush(stdout);
    }
  }
  sim.RunUntilIdle();  // Let the third replica catch up.
  std::printf("load: %llu elements x 3 replicas in %.1f s\n\n",
              static_cast<unsigned long long>(n), Seconds(t));

  // 2. Stream it back through an R=2 merge.
  t = Clock::now();
  CountingReader reader;
  sim.node(4)->Read(set, bigset::ClusterReadOptions(), &reader);
  sim.RunUntil([&reader]() { return reader.done; });
  if (!reader.status.ok()) return Fail("streaming read", reader.status);
  std::printf(
      "streamed %llu elements in order=%s, clock of %llu dots, in "
      "%.1f s\n\n",
      static_cast<unsigned long long>(reader.count),
      reader.ordered ? "yes" : "NO",
      static_cast<unsigned long long>(reader.clock_dots), Seconds(t));

  // 3. Queries.
  auto m = sim.ContainsAll(2, set, {Item(0), Item(n / 2), "not-an-item"});
  if (!m.ok()) return Fail("membership", m.status());
  for (const auto& e : m->elements) {
    std::printf("contains %-14s -> %s", e.element.c_str(),
                e.dots.empty() ? "no\n" : "yes, context ");
    for (auto d : e.dots) std::printf("%s ", bigset::DotToString(d).c_str());
    if (!e.dots.empty()) std::printf("\n");
  }
  bigset::RangeQuery q;
  q.start = Item(n / 3);
  q.limit = 5;
  for (int page = 1; page <= 2; ++page) {
    auto r = sim.Range(3, set, q);
    if (!r.ok()) return Fail("range", r.status());
    std::printf("range page %d:", page);
    for (const auto& e : r->elements) std::printf(" %s", e.element.c_str());
    std::printf("\n");
    q.continuation = r->continuation;
  }
  auto count = sim.Count(5, set);
  if (!count.ok()) return Fail("count", count.status());
  std::printf("count: %llu\n\n", static_cast<unsigned long long>(*count));

  // 4. Crash a replica; reads and writes go on.
  const bigset::NodeId victim = pl[0];
  if (auto s = sim.Crash(victim); !s.ok()) return Fail("crash", s);
  std::printf("crashed node %u (a replica of \"%s\")\n", victim, set.c_str());
  std::vector<bigset::UpdateOp> more;
  for (uint64_t j = n; j < n + 1000; ++j)
    more.push_back(bigset::UpdateOp::Add(Item(j)));
  auto w = sim.Update(pl[1], set, std::move(more));
  if (!w.ok()) return Fail("write with a node down", w.status());
  auto rm = sim.ContainsAll(pl[2], set, {Item(7)});
  if (!rm.ok()) return Fail("membership with a node down", rm.status());
  auto del = sim.Update(
      pl[2], set, {bigset::UpdateOp::Remove(Item(7), rm->elements[0].dots)});
  if (!del.ok()) return Fail("remove with a node down", del.status());
  count = sim.Count(pl[1], set);
  if (!count.ok()) return Fail("count with a node down", count.status());
  std::printf("with node %u down: added 1000, removed %s; count = %llu\n\n",
              victim, Item(7).c_str(), static_cast<unsigned long long>(*count));
  sim.RunUntilIdle();

  // 5. Restart it: it missed those writes until a read repairs it.
  if (auto s = sim.Restart(victim); !s.ok()) return Fail("restart", s);
  std::printf("restarted node %u: its replica holds %llu elements\n", victim,
              static_cast<unsigned long long>(LocalCount(sim, victim, set)));
  t = Clock::now();
  bigset::ClusterReadOptions all;
  all.r = 3;  // Merge all three replicas: every difference gets repaired.
  auto repaired = sim.Count(victim, set, all);
  if (!repaired.ok()) return Fail("repairing read", repaired.status());
  sim.RunUntilIdle();
  const auto stats = sim.node(victim)->stats();
  std::printf(
      "read with R=3 (%.1f s) sent %llu repair ops; node %u's replica "
      "now holds %llu elements\n",
      Seconds(t),
      static_cast<unsigned long long>(Counter(stats, "read.repair_ops_sent")),
      victim, static_cast<unsigned long long>(LocalCount(sim, victim, set)));
  const bool converged = LocalCount(sim, victim, set) == *repaired &&
                         LocalCount(sim, pl[1], set) == *repaired &&
                         LocalCount(sim, pl[2], set) == *repaired;
  std::printf("replicas converged: %s\n\n", converged ? "yes" : "NO");

  // 6. Grow to 6 nodes and shrink back to 5 while a writer keeps adding.
  uint64_t next = 0;
  std::vector<std::string> acked;
  for (const auto& nodes : {std::vector<bigset::NodeId>{1, 2, 3, 4, 5, 6},
                            std::vector<bigset::NodeId>{1, 2, 3, 4, 5}}) {
    auto more_acked = ChangeMembership(sim, nodes, set, &next);
    if (!more_acked.ok()) return Fail("membership change", more_acked.status());
    acked.insert(acked.end(), more_acked->begin(), more_acked->end());
  }
  uint64_t present = 0;
  for (size_t i = 0; i < acked.size(); i += 1000) {
    std::vector<std::string> some(
        acked.begin() + i, acked.begin() + std::min(acked.size(), i + 1000));
    auto has = sim.ContainsAll(1, set, some);
    if (!has.ok()) return Fail("checking the writer's elements", has.status());
    for (const auto& e : has->elements) present += !e.dots.empty();
  }
  auto total = sim.Count(2, set);
  if (!total.ok()) return Fail("count after the changes", total.status());
  const bool kept =
      present == acked.size() && *total == *repaired + acked.size();
  std::printf(
      "after 5 -> 6 -> 5 nodes: %llu of %llu acknowledged writer elements "
      "present; count %llu (expected %llu): %s\n",
      static_cast<unsigned long long>(present),
      static_cast<unsigned long long>(acked.size()),
      static_cast<unsigned long long>(*total),
      static_cast<unsigned long long>(*repaired + acked.size()),
      kept ? "nothing lost" : "LOST WRITES");

  // 7. Anti-entropy: a replica misses writes and converges with no read.
  const auto& owners = sim.ring().PreferenceList(partition);
  const bigset::NodeId behind = owners[2];
  if (auto s = sim.Crash(behind); !s.ok()) return Fail("crash", s);
  uint64_t added = 0, removed = 0;
  for (uint64_t j = 0; j < 500; ++j) {
    auto a =
        sim.Update(owners[0], set, {bigset::UpdateOp::Add("late-" + Item(j))});
    added += a.ok();
  }
  for (uint64_t j = 0; j < 50; ++j) {
    // A remove of what the coordinating replica holds (no read needed).
    auto op = bigset::UpdateOp::Remove(Item(n / 2 + j), {});
    op.context_from_replica = true;
    auto r = sim.Update(owners[0], set, {op});
    removed += r.ok();
  }
  sim.RunFor(3'000'000);  // The writes end without node `behind`'s ack.
  if (auto s = sim.Restart(behind); !s.ok()) return Fail("restart", s);
  std::printf(
      "\nnode %u was down for %llu adds and %llu removes; restarted, its "
      "replica holds %llu elements, node %u's %llu\n",
      behind, static_cast<unsigned long long>(added),
      static_cast<unsigned long long>(removed),
      static_cast<unsigned long long>(LocalCount(sim, behind, set)), owners[0],
      static_cast<unsigned long long>(LocalCount(sim, owners[0], set)));
  // Each node's timer starts a round every anti_entropy_interval_micros;
  // the simulator leaves that timer off (so that RunUntilIdle returns), so
  // here every node starts its rounds once per virtual second. No read.
  auto digests_equal = [&]() {
    const uint64_t d =
        sim.node(owners[0])->LocalReplica(partition)->PartitionDigest();
    for (bigset::NodeId o : owners) {
      if (sim.node(o)->LocalReplica(partition)->PartitionDigest() != d) {
        return false;
      }
    }
    return true;
  };
  int seconds = 0;
  for (; seconds < 60 && !digests_equal(); ++seconds) {
    for (bigset::NodeId id : sim.node_ids()) {
      if (sim.IsUp(id)) sim.node(id)->RunAntiEntropy();
    }
    sim.RunFor(1'000'000);
  }
  uint64_t hints = 0, repaired_sets = 0, pushed = 0, ae_bytes = 0, rounds = 0;
  for (bigset::NodeId id : sim.node_ids()) {
    const auto st = sim.node(id)->stats();
    hints += Counter(st, "anti_entropy.updates_sent");
    repaired_sets += Counter(st, "anti_entropy.sets_repaired");
    pushed += Counter(st, "anti_entropy.keys_pushed");
    ae_bytes += Counter(st, "anti_entropy.bytes_sent");
    rounds += Counter(st, "anti_entropy.rounds");
  }
  const bool ae_converged =
      digests_equal() &&
      LocalCount(sim, behind, set) == LocalCount(sim, owners[0], set) &&
      LocalCount(sim, owners[1], set) == LocalCount(sim, owners[0], set);
  std::printf(
      "anti-entropy, no read: after %d virtual s, node %u's replica holds "
      "%llu elements (%llu rounds, %llu updates resent from hints, %llu "
      "sets repaired, %llu keys pushed, %llu bytes): converged: %s\n",
      seconds, behind,
      static_cast<unsigned long long>(LocalCount(sim, behind, set)),
      static_cast<unsigned long long>(rounds),
      static_cast<unsigned long long>(hints),
      static_cast<unsigned long long>(repaired_sets),
      static_cast<unsigned long long>(pushed),
      static_cast<unsigned long long>(ae_bytes), ae_converged ? "yes" : "NO");

  created->reset();
  std::filesystem::remove_all(dir);
  return converged && kept && ae_converged && reader.ordered &&
                 reader.count == n
             ? 0
             : 1;
}
