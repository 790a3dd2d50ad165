// The cluster's lifecycle under faults, as an operator's cluster lives it:
// random histories of adds, removes with contexts from quorum queries and
// whole-set clears, with a membership change every 25 operations or so (a
// node joins, or a random node leaves; rings installed on every node, or on
// some first and the rest later, often before the previous change has
// finished), one node at a time crashed or stopped cleanly and restarted
// (in half the histories with power losses, with the default
// sync_writes = false),
// message loss and duplication, and anti-entropy rounds every 0.3 s.
//
// At every step a quorum read (R = 2 < N, no read repair) agrees with the
// model of acknowledged writes. After each change, once every node is up,
// single replicas are checked against what the protocol promises: every
// acknowledged add is on at least W distinct replicas of the partition
// (each counted by its own node's state), before any repair. And at every
// write: an acknowledged add's dot, and an acknowledged remove's context,
// are on W distinct replicas the moment the write returns (failed over
// too), and every acknowledgement of a replicated add, as it is sent,
// names a node that applied it (or whose taker did). Storm histories make
// writes fail over while places move: slow nodes, a change every 8
// operations, a node down most of the time.
//
// Then the network heals, every node restarts, and no client operation
// runs: within the bound (kSettleBound of virtual time) every node's
// serving list of every partition is the latest ring's list, nothing moves
// or is released any more, every node of a list holds the partition's
// replica and no other node holds any of its keys, and every replica of
// every set is equal to every other and to the model.
//
// With sync_writes off a power loss may take the writes of the last
// writeback interval (SimOptions::writeback_micros) from the machine that
// lost power: writes acknowledged that recently become unknown in the
// model.
//
// BIGSET_TEST_SCALE multiplies the histories; BIGSET_TEST_SEED reruns one.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bigset/keys/keys.h"
#include "bigset/testing/sim.h"
#include "handoff_util.h"
#include "net/message.h"
#include "replica_views.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

using Model = testing::KnownModel;

// What a healed cluster (every node restarted, anti-entropy every 0.3 s)
// needs to converge: every partition moved, released and repaired. The
// slowest of 504 histories took 2 s (BIGSET_TEST_SCALE=63).
constexpr uint64_t kSettleBound = 60 * kSecond;
constexpr uint64_t kWriteback = 500'000;

struct Totals {
  uint64_t histories = 0, ops = 0, acked = 0, failed = 0, changes = 0;
  uint64_t crashes = 0, power_losses = 0, clean_stops = 0, copy_checks = 0;
  uint64_t transfers = 0;
  uint64_t slowest_settle = 0, total_settle = 0;
  uint64_t supplements = 0, receiver_restarts = 0, flaps = 0;
  uint64_t slow_links = 0, slow_nodes = 0, failed_over = 0, ack_checks = 0;
  uint64_t answer_checks = 0, splits = 0, rejoins = 0;
  uint64_t violations = 0;  // Of the copy and acknowledgement checks.
};

Ring MakeRing(std::vector<NodeId> nodes, uint64_t epoch) {
  std::sort(nodes.begin(), nodes.end());
  return RendezvousRing(std::move(nodes), epoch, 16, 3);
}

std::string Describe(Simulator& sim) {
  std::string out = testing::Unsettled(sim);
  for (NodeId id = 1; id <= sim.node_count(); ++id) {
    Node* node = sim.node(id);
    if (node == nullptr) continue;
    for (const PartitionMove& m : node->Moving()) {
      absl::StrAppend(&out, "node ", id, " p", m.partition, ": ", m.state,
                      " for ", m.since_micros / 1000, " ms; serving");
      for (NodeId n : m.serving) absl::StrAppend(&out, " ", n);
      absl::StrAppend(&out, "; ring");
      for (NodeId n : m.target) absl::StrAppend(&out, " ", n);
      absl::StrAppend(&out, "\n");
    }
  }
  for (const std::string& line : sim.TraceTail()) {
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

class History {
 public:
  // `slow_links`: now and then one direction of one link is slow for a
  // while (its own random sequence, so that the other faults of a seed
  // stay as they were).
  // `storm`: slow links and nodes more often, a change every 8 operations
  // or so and a node down most of the time, so that writes fail over
  // while places move and one replica of the set is down (what W then
  // needs of a leaver's place: "defect: a leaver that coordinated a
  // given-up write ..." in membership_attack_test).
  // `partitions`: now and then the network splits in two for a few
  // operations (its own random sequence too).
  // `rejoin`: half the joins bring back a node that left (the same id,
  // drawn from its own sequence), so that a node leaves a partition and
  // later takes another place in it while views lag; and a change every
  // 8 operations or so, so that the next one comes before the last
  // settled everywhere.
  History(uint64_t seed, bool power, Totals* totals, bool slow_links = false,
          bool storm = false, bool partitions = false, bool rejoin = false)
      : seed_(seed),
        power_(power),
        slow_links_(slow_links || storm),
        storm_(storm),
        partitions_(partitions),
        rejoin_(rejoin),
        totals_(totals),
        rng_(seed * 31 + power),
        slow_rng_(seed * 37 + 11),
        split_rng_(seed * 41 + 7),
        rejoin_rng_(seed * 43 + 3) {
    SimOptions o = ChunkedClusterOptions(seed, 5, 16, 3, 4);
    o.node.handoff.max_running = 2;
    o.node.anti_entropy.interval_micros = 300'000;
    o.min_latency_micros = 1000;
    o.max_latency_micros = 6000;
    o.loss = 0.02;
    o.duplicate = 0.02;
    o.trace_capacity = 60;
    if (power_) o.writeback_micros = kWriteback;
    auto created = Simulator::Create(o);
    REQUIRE(created.ok());
    sim_ = std::move(*created);
    sim_->SetSendObserver(
        [this](NodeId from, NodeId to, std::string_view bytes) {
          Observe(from, to, bytes);
        });
    for (NodeId id = 1; id <= 5; ++id) members_.push_back(id);
    wo_.timeout_micros = 3'000'000;
    ro_.timeout_micros = 3'000'000;
    ro_.batch_size = 8;
    ro_.read_repair = false;  // It would mend what the protocols missed.
    // Half the seeds ask R replicas first and the others after a hedge
    // (drawn from no generator: the histories stay).
    ro_.query_hedge_micros = seed % 2 == 0 ? 0 : 1000 + seed % 30'000;
  }

  ~History() { sim_->SetSendObserver({}); }  // It reads this history.

  void Run(int ops) {
    for (int i = 0; i < ops; ++i) {
      Op();
      Faults();
      if (!late_.empty() && --late_in_ <= 0) InstallLate();
      if (Uniform(rng_, 0, storm_ || rejoin_ ? 7 : 24) == 0) Change();
      if (slow_links_) SlowLinks();
      if (partitions_) Splits();
      if (check_copies_in_ > 0 && --check_copies_in_ == 0) CheckCopies();
    }
    Settle();
  }

 private:
  NodeId RandomUp() {
    std::vector<NodeId> up;
    for (NodeId id = 1; id <= sim_->node_count(); ++id) {
      if (sim_->IsUp(id)) up.push_back(id);
    }
    return up[Uniform(rng_, 0, up.size() - 1)];
  }

  void Acked(const std::string& set, const std::string& element, Known k) {
    model_.sets[set][element] = k;
    acked_at_[{set, element}] = sim_->NowMicros();
  }

  void Op() {
    CAPTURE(seed_, power_);
    ++totals_->ops;
    const std::string set = absl::StrCat("s", Uniform(rng_, 0, 9));
    const NodeId via = RandomUp();
    const uint64_t kind = Uniform(rng_, 0, 99);
    if (kind < 55) {
      const std::string element = absl::StrCat("e", Uniform(rng_, 0, 60));
      model_.sets[set].try_emplace(element, Known::kAbsent);
      const uint64_t switches = Switches(via);
      absl::StatusOr<Delta> d =
          Ended(sim_->Update(via, set, {UpdateOp::Add(element)}, wo_));
      Count(d.ok());
      // An add that switched coordinator may get a second dot later, from
      // the replica it gave up on, even after a clear acknowledged since
      // (docs/DESIGN.md, "Failover"): from then on it may be present
      // whatever the model says.
      if (d.ok() && Switches(via) != switches) {
        ++totals_->failed_over;
        Acked(set, element, Known::kUnknown);
      } else {
        Acked(set, element, d.ok() ? Known::kPresent : Known::kUnknown);
      }
      // Its dot may sit on a replica cut off or down, and surface after a
      // later add and remove of the element (whose read did not see it).
      if (!d.ok() || Switches(via) != switches) {
        model_.may_return[set].insert(element);
      }
      // Failed over or not, the dot the write chose is on W places now.
      if (d.ok()) {
        REQUIRE(d->ops.size() == 1);
        REQUIRE(d->ops[0].add.has_value());
        CheckAckedAdd(set, element, *d->ops[0].add);
      }
    } else if (kind < 80) {
      const std::string element = absl::StrCat("e", Uniform(rng_, 0, 60));
      Known& known =
          model_.sets[set].try_emplace(element, Known::kAbsent).first->second;
      absl::StatusOr<Membership> m =
          Ended(sim_->ContainsAll(via, set, {element}, ro_));
      if (!m.ok()) return;
      if (known == Known::kPresent) CHECK(m->all_present);
      std::vector<Dot> context;
      for (const ElementDots& e : m->elements) {
        context.insert(context.end(), e.dots.begin(), e.dots.end());
      }
      absl::StatusOr<Delta> d = Ended(
          sim_->Update(via, set, {UpdateOp::Remove(element, context)}, wo_));
      Count(d.ok());
      // A remove with the context of a quorum read removes every
      // acknowledged add; an unknown add may survive it.
      if (d.ok() && known != Known::kUnknown) {
        Acked(set, element, Known::kAbsent);
      } else if (!d.ok()) {
        Acked(set, element, Known::kUnknown);
      }
      if (d.ok()) CheckAckedRemove(set, element, context);
    } else if (kind < 83) {
      absl::StatusOr<SimReadResult> r = Ended(sim_->Read(via, set, ro_));
      if (!r.ok()) return;
      CheckKnown(set, r->elements, model_);
      absl::StatusOr<Delta> d = Ended(sim_->Clear(via, set, r->clock, wo_));
      Count(d.ok());
      for (const ElementDots& e : r->elements) {
        Known& known = model_.sets[set][e.element];
        if (!d.ok()) {
          Acked(set, e.element, Known::kUnknown);
        } else if (known != Known::kUnknown) {
          Acked(set, e.element, Known::kAbsent);
        }
      }
    } else {
      absl::StatusOr<SimReadResult> r = Ended(sim_->Read(via, set, ro_));
      if (r.ok()) CheckKnown(set, r->elements, model_);
    }
  }

  // Every request ends within its deadline (plus the simulator's margin):
  // a blocking call that reports one that did not fails the history.
  template <typename T>
  absl::StatusOr<T> Ended(absl::StatusOr<T> result) {
    if (Simulator::IsUnanswered(result.status())) {
      FAIL("seed " << seed_ << " power " << power_ << ": "
                   << result.status().message() << "\n"
                   << Describe(*sim_));
    }
    // Every read's client got what ReadHandler promises, in order.
    REQUIRE(sim_->read_contract_violations() == 0);
    return result;
  }

  uint64_t Switches(NodeId via) {
    return Stat(sim_->node(via)->stats(), "write.coordinator_switches");
  }

  void Count(bool ok) { ok ? ++totals_->acked : ++totals_->failed; }

  // Adds a node's counters to the totals before it stops (they do not
  // survive a restart).
  void Harvest(NodeId id) {
    const NodeStats s = sim_->node(id)->stats();
    totals_->transfers += Stat(s, "handoff.done");
    totals_->receiver_restarts += Stat(s, "handoff.receiver_restarts");
    // Every ended request unrouted what it routed.
    REQUIRE(Stat(s, "node.stale_routes") == 0);
  }

  // One node down at a time, restarted a few operations later.
  void Faults() {
    if (down_ != 0 && --down_for_ <= 0) {
      REQUIRE(sim_->Restart(down_, Uniform(rng_, 0, 1) == 0).ok());
      down_ = 0;
    } else if (down_ == 0 && Uniform(rng_, 0, storm_ ? 2 : 11) == 0) {
      down_ = RandomUp();
      down_for_ = static_cast<int>(Uniform(rng_, 1, 8));
      ++totals_->crashes;
      Harvest(down_);
      if (power_ && Uniform(rng_, 0, 1) == 0) {
        REQUIRE(sim_->PowerLoss(down_).ok());
        ++totals_->power_losses;
        last_power_loss_ = sim_->NowMicros();
        // Writes acknowledged within the last writeback interval may be
        // gone from that machine (and with it below W copies).
        const uint64_t now = sim_->NowMicros();
        const uint64_t since =
            now > kWriteback + kSecond ? now - kWriteback - kSecond : 0;
        for (const auto& [key, at] : acked_at_) {
          if (at >= since) {
            model_.sets[key.first][key.second] = Known::kUnknown;
            // Lost here, an add may stay on fewer than W replicas, which a
            // later quorum read (and the remove built on it) may miss.
            model_.may_return[key.first].insert(key.second);
          }
        }
      } else if (Uniform(rng_, 0, 2) == 0) {
        // A clean stop (Node::Close) answers what the node coordinates and
        // must leave its hand-offs resumable, as a crash does.
        REQUIRE(sim_->Stop(down_).ok());
        ++totals_->clean_stops;
      } else {
        REQUIRE(sim_->Crash(down_).ok());
      }
    }
  }

  // One direction of one link at a time is slow (100 ms to 1.5 s more),
  // for a few operations: the node at its end hears gossip late, so its
  // view lags the others' while writes and reads go on through it. Or, one
  // time in three, every link into one node is slow (an overloaded node):
  // its view lags all of the cluster, and every answer to what it
  // coordinates is late, so its writes fail over while places move.
  void SlowLinks() {
    if (slow_for_ > 0) {
      if (--slow_for_ == 0) {
        for (const auto& [from, to] : slow_) sim_->SlowLink(from, to, 0);
        slow_.clear();
      }
      return;
    }
    if (Uniform(slow_rng_, 0, storm_ ? 1 : 5) != 0) return;
    const NodeId n = sim_->node_count();
    const NodeId to = static_cast<NodeId>(Uniform(slow_rng_, 1, n));
    if (storm_ || Uniform(slow_rng_, 0, 2) == 0) {
      for (NodeId from = 1; from <= n; ++from) {
        if (from != to) slow_.emplace_back(from, to);
      }
      ++totals_->slow_nodes;
    } else {
      NodeId from = static_cast<NodeId>(Uniform(slow_rng_, 1, n - 1));
      if (from >= to) ++from;
      slow_.emplace_back(from, to);
    }
    slow_for_ = static_cast<int>(Uniform(slow_rng_, 3, 30));
    const uint64_t extra = Uniform(slow_rng_, 100'000, 1'500'000);
    for (const auto& [from, to] : slow_) sim_->SlowLink(from, to, extra);
    ++totals_->slow_links;
  }

  // The network splits in two (a random side of one or two nodes, or
  // any cut) for 1 to 15 operations, then heals.
  void Splits() {
    if (split_for_ > 0) {
      if (--split_for_ == 0) sim_->Heal();
      return;
    }
    if (Uniform(split_rng_, 0, 14) != 0) return;
    std::vector<NodeId> all;
    for (NodeId id = 1; id <= sim_->node_count(); ++id) all.push_back(id);
    std::shuffle(all.begin(), all.end(), split_rng_);
    const size_t cut = Uniform(split_rng_, 1, all.size() - 1);
    sim_->Partition({std::vector<NodeId>(all.begin(), all.begin() + cut),
                     std::vector<NodeId>(all.begin() + cut, all.end())});
    split_for_ = static_cast<int>(Uniform(split_rng_, 1, 15));
    ++totals_->splits;
  }

  // A node joins (the next id) or a member leaves; the ring goes to every
  // node, or to some now and the rest a few operations later.
  void Change() {
    if (!late_.empty()) InstallLate();
    ++totals_->changes;
    std::vector<NodeId> next = members_;
    const bool join =
        next.size() <= 4 || (next.size() < 7 && Uniform(rng_, 0, 1));
    if (join) {
      next.push_back(Joiner());
    } else {
      next.erase(next.begin() + Uniform(rng_, 0, next.size() - 1));
    }
    members_ = next;
    if (next.size() > 3 && Uniform(rng_, 0, 3) == 0) Flap(next, join);
    const Ring ring = MakeRing(next, ++epoch_);
    // Every node ever started gets the ring, those that left too (they
    // may still hand off; one that is down gets it when it restarts).
    std::vector<NodeId> all;
    for (NodeId id = 1; id <= sim_->node_count(); ++id) all.push_back(id);
    if (join && next.back() > sim_->node_count()) all.push_back(next.back());
    if (Uniform(rng_, 0, 2) == 0) {
      // Some nodes first (the joiner among them or not).
      std::shuffle(all.begin(), all.end(), rng_);
      const size_t first = Uniform(rng_, 1, all.size() - 1);
      std::vector<NodeId> early(all.begin(), all.begin() + first);
      late_.assign(all.begin() + first, all.end());
      // A node that does not exist yet joins only with the install that
      // names it; one that does not exist when the later install comes is
      // created by it.
      REQUIRE(sim_->InstallRing(ring, early).ok());
      late_ring_ = ring;
      late_in_ = static_cast<int>(Uniform(rng_, 1, 10));
    } else {
      REQUIRE(sim_->InstallRing(ring, all).ok());
    }
    check_copies_in_ = 12;
  }

  // The node a join adds: the next id, or with `rejoin_` half the time a
  // node that left the ring (up or down; a down one gets the ring when it
  // restarts).
  NodeId Joiner() {
    if (rejoin_ && Uniform(rejoin_rng_, 0, 1) == 0) {
      std::vector<NodeId> gone;
      for (NodeId id = 1; id <= sim_->node_count(); ++id) {
        if (std::find(members_.begin(), members_.end(), id) == members_.end()) {
          gone.push_back(id);
        }
      }
      if (!gone.empty()) {
        ++totals_->rejoins;
        return gone[Uniform(rejoin_rng_, 0, gone.size() - 1)];
      }
    }
    return sim_->node_count() + 1;
  }

  // One node, alone, first gets a ring that leaves it out (an operator
  // removed it and put it back at once, and it saw the removal before the
  // others, or alone): it retires the replicas it was receiving into, and
  // the ring that puts it back (installed next) opens them anew while the
  // senders, which never saw the removal, go on streaming. It found the
  // receiver applying a set's next chunks into the new replica under the
  // old one's state (removed elements came back here; "set stream
  // regression: a receiver's replica released and hosted again mid-set
  // loses no element"), the simulator opening a joiner with a ring that
  // names it (the flap ring: it served at once, without data), and a
  // departed entry pruned while a node whose place was taken still followed
  // the chain of takers through it (lifecycle_regressions_test).
  void Flap(const std::vector<NodeId>& next, bool join) {
    std::vector<NodeId> existing = next;
    if (join) existing.pop_back();  // The joiner does not exist yet.
    const NodeId x = existing[Uniform(rng_, 0, existing.size() - 1)];
    std::vector<NodeId> without;
    for (NodeId id : next) {
      if (id != x) without.push_back(id);
    }
    REQUIRE(sim_->InstallRing(MakeRing(without, ++epoch_), {x}).ok());
    ++totals_->flaps;
  }

  void InstallLate() {
    REQUIRE(sim_->InstallRing(*late_ring_, late_).ok());
    late_.clear();
  }

  // Every acknowledgement of a replicated add is checked as it is sent:
  // the node it names (the one that acknowledges, or the one it passed the
  // delta on to) has the add's dot in its set-clock, or, handed over, in
  // its store or through the node that took its place. Whether the write
  // still needs that answer does not matter, so this finds a place
  // answered for falsely even when the other replicas' acks make W without
  // it (the given-up defect needed one of them down to show in the copy
  // checks, and no soak history found it that way).
  struct SentAdd {
    std::string set;
    std::string element;
    Dot dot;
    uint64_t at;  // When it was first sent.
  };
  using SentKey = std::tuple<NodeId, uint64_t, NodeId>;  // From, id, to.

  void Observe(NodeId from, NodeId to, std::string_view bytes) {
    absl::StatusOr<Message> m = DecodeMessage(bytes);
    if (!m.ok()) return;
    const SentKey key{from, m->header.request_id, to};
    const SentKey answered{to, m->header.request_id, from};
    if (const auto* r = m->As<msg::Replicate>()) {
      Record(r->delta, &replicated_[key]);
    } else if (const auto* g = m->As<msg::ReplicateGivenUp>()) {
      Record(g->delta, &given_up_[key]);
    } else if (const auto* a = m->As<msg::ReplicateAck>()) {
      if (!a->status.ok()) return;
      std::vector<SentAdd> sent;
      AppendSent(replicated_, answered, &sent);
      AppendSent(given_up_, answered, &sent);
      CheckAnswer(from, a->applied_by, sent);
    } else if (m->As<msg::ReplicateAckWithDelta>() != nullptr) {
      std::vector<SentAdd> sent;
      AppendSent(given_up_, answered, &sent);
      CheckAnswer(from, from, sent);
    }
  }

  static void AppendSent(const std::map<SentKey, std::vector<SentAdd>>& sent,
                         const SentKey& key, std::vector<SentAdd>* out) {
    auto it = sent.find(key);
    if (it != sent.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
    }
  }

  void Record(const Delta& delta, std::vector<SentAdd>* sent) {
    for (const DeltaOp& op : delta.ops) {
      if (!op.add.has_value()) continue;
      const bool known =
          std::any_of(sent->begin(), sent->end(), [&](const SentAdd& a) {
            return a.dot == *op.add && a.element == op.element;
          });
      if (!known) {
        sent->push_back(
            SentAdd{delta.set, op.element, *op.add, sim_->NowMicros()});
      }
    }
  }

  // `answerer` acknowledged `sent`, what the coordinator sent it under one
  // request id (adds, as Replicate or as a given-up question); `applied_by`
  // is the node it names as having applied it. One of those must be there.
  void CheckAnswer(NodeId answerer, NodeId applied_by,
                   const std::vector<SentAdd>& sent) {
    if (sent.empty()) return;  // Not an add, or sent before a restart.
    // A power loss since may have taken it: only a copy check counts
    // copies then.
    const bool held =
        std::any_of(sent.begin(), sent.end(), [&](const SentAdd& a) {
          return last_power_loss_ >= a.at || Applied(applied_by, a, 0);
        });
    ++totals_->answer_checks;
    if (held) return;
    ++totals_->violations;
    const SentAdd& a = sent.front();
    const std::string dot = DotToString(a.dot);
    const uint32_t p = sim_->ring().PartitionOf(a.set);
    const bool has_replica = sim_->node(applied_by) != nullptr &&
                             sim_->node(applied_by)->LocalReplica(p) != nullptr;
    const uint64_t sent_at = a.at, now = sim_->NowMicros();
    CAPTURE(seed_, power_, answerer, applied_by, a.set, a.element, dot, p,
            has_replica, sent_at, now);
    FAIL_CHECK(Describe(*sim_));
  }

  // Whether node `id` applied `add`: its replica's set-clock has seen the
  // dot; or, its replica handed over, its store still has the key (it
  // applied the add before) or the node it passes writes on to applied it.
  // A node that let go and forgot where its place went cannot be checked.
  bool Applied(NodeId id, const SentAdd& add, int depth) {
    if (!sim_->IsUp(id) || depth > 4) return true;  // Cannot tell.
    const uint32_t p = sim_->ring().PartitionOf(add.set);
    Node* node = sim_->node(id);
    if (Replica* replica = node->LocalReplica(p)) {
      // No REQUIRE here: this runs inside a node's Send.
      absl::StatusOr<std::unique_ptr<SetReader>> reader =
          replica->Read(add.set, SetReadOptions());
      CHECK(reader.ok());
      return !reader.ok() || (*reader)->clock().Seen(add.dot);
    }
    if (StoreHas(id, add.set, add.element, add.dot)) return true;
    if (const NodeId taker = node->PassesOnTo(p); taker != 0) {
      return Applied(taker, add, depth + 1);
    }
    for (const PartitionMove& move : node->Moving()) {
      if (move.partition == p && move.peer != 0) {
        return Applied(move.peer, add, depth + 1);
      }
    }
    return true;  // Let go of the partition: where it went is not visible.
  }

  // The nodes that serve `set`'s partition in their own view, each with
  // its replica, or null for a node that handed it over and still serves
  // (it drains). Such a node's store keeps what it applied until its
  // forwards drained and its taker confirmed them (only then does it stop
  // serving), so a write it applied counts through its store; one it
  // passed on counts through its taker. A node and the one it passes
  // writes on to are one place (Places). A receiver that does not serve
  // yet is no place of its own.
  struct Holder {
    NodeId id;
    Replica* replica;  // null: handed over; read its store.
    NodeId taker;      // Node::PassesOnTo, or 0.
  };
  std::vector<Holder> Holders(const std::string& set) {
    const uint32_t p = sim_->ring().PartitionOf(set);
    std::vector<Holder> out;
    for (NodeId id = 1; id <= sim_->node_count(); ++id) {
      if (!sim_->IsUp(id)) continue;
      Node* node = sim_->node(id);
      const std::vector<NodeId> view = node->ServingList(p);
      if (std::find(view.begin(), view.end(), id) != view.end()) {
        out.push_back(Holder{id, node->LocalReplica(p), node->PassesOnTo(p)});
      }
    }
    return out;
  }

  // How many places the holders `ids` (of `holders`) make: a holder whose
  // taker is among them is the same place.
  static int Places(const std::vector<Holder>& holders,
                    const std::vector<NodeId>& ids) {
    int places = 0;
    for (const Holder& h : holders) {
      if (std::find(ids.begin(), ids.end(), h.id) == ids.end()) continue;
      if (h.taker == 0 ||
          std::find(ids.begin(), ids.end(), h.taker) == ids.end()) {
        ++places;
      }
    }
    return places;
  }

  // Whether `holder` has `dot` of `element` (a key that no tombstone of
  // its covers, for a replica; the key itself, for a store).
  bool Has(const Holder& holder, const std::string& set,
           const std::string& element, Dot dot) {
    if (holder.replica != nullptr) {
      absl::StatusOr<std::vector<Dot>> dots =
          holder.replica->Contains(set, element);
      REQUIRE(dots.ok());
      return std::find(dots->begin(), dots->end(), dot) != dots->end();
    }
    return StoreHas(holder.id, set, element, dot);
  }

  // Whether node `id`'s store has the key of `dot` of `element`. (CHECK,
  // not REQUIRE: the send observer calls it inside a node's Send.)
  bool StoreHas(NodeId id, const std::string& set, const std::string& element,
                Dot dot) {
    std::string value;
    const absl::Status s = sim_->store(id)->Get(
        ReadOptions(),
        ElementKey(sim_->ring().PartitionOf(set), set, element, dot), &value);
    CHECK((s.ok() || absl::IsNotFound(s)));
    return s.ok();
  }

  // When an add is acknowledged, the dot it chose is in at least W places,
  // each by its own state, before any repair could mend
  // it: W places acknowledged, each only once the dot was applied there
  // (through a failover too, and through a leaver for its taker). The
  // element-level check (CheckCopies) missed a leaver that answered for
  // its place with its own dot while its taker lacked the chosen one
  // ("defect: a leaver that coordinated a given-up write answered for its
  // place from its cache ..." in membership_attack_test).
  void CheckAckedAdd(const std::string& set, const std::string& element,
                     Dot dot) {
    const std::vector<Holder> all = Holders(set);
    std::vector<NodeId> holders;
    for (const Holder& h : all) {
      if (Has(h, set, element, dot)) holders.push_back(h.id);
    }
    ++totals_->ack_checks;
    const std::string chosen = DotToString(dot);
    const int places = Places(all, holders);
    CAPTURE(seed_, power_, set, element, chosen, holders, places);
    if (places < wo_.w) {
      ++totals_->violations;
      FAIL_CHECK(Describe(*sim_));
    }
  }

  // When a remove is acknowledged, at least W places have seen every dot
  // of its context and hold none of them. (A handed-over node is
  // counted if its store holds none: it may never have had them, so this
  // errs towards passing.)
  void CheckAckedRemove(const std::string& set, const std::string& element,
                        const std::vector<Dot>& context) {
    const std::vector<Holder> holders = Holders(set);
    std::vector<NodeId> applied;
    for (const Holder& h : holders) {
      bool all = std::none_of(context.begin(), context.end(),
                              [&](Dot d) { return Has(h, set, element, d); });
      if (all && h.replica != nullptr) {
        absl::StatusOr<std::unique_ptr<SetReader>> reader =
            h.replica->Read(set, SetReadOptions());
        REQUIRE(reader.ok());
        const Clock& clock = (*reader)->clock();
        all = std::all_of(context.begin(), context.end(),
                          [&](Dot d) { return clock.Seen(d); });
      }
      if (all) applied.push_back(h.id);
    }
    ++totals_->ack_checks;
    std::string removed;
    for (const Dot& d : context) absl::StrAppend(&removed, DotToString(d), " ");
    const int places = Places(holders, applied);
    CAPTURE(seed_, power_, set, element, removed, applied, places);
    if (places < wo_.w) {
      ++totals_->violations;
      FAIL_CHECK(Describe(*sim_));
    }
  }

  // Every acknowledged add is on at least W distinct replicas that serve
  // its partition by their own account (a node handing over counts: its
  // copy is on its receiver once its forwards drain).
  void CheckCopies() {
    for (NodeId id = 1; id <= sim_->node_count(); ++id) {
      if (!sim_->IsUp(id)) return;
    }
    ++totals_->copy_checks;
    const Ring& ring = sim_->ring();
    for (const auto& [set, elements] : model_.sets) {
      const uint32_t p = ring.PartitionOf(set);
      std::map<NodeId, std::set<std::string>> held;
      std::vector<NodeId> serving;
      for (NodeId id = 1; id <= sim_->node_count(); ++id) {
        Node* node = sim_->node(id);
        const std::vector<NodeId> view = node->ServingList(p);
        if (std::find(view.begin(), view.end(), id) == view.end()) continue;
        serving.push_back(id);
        Replica* replica = node->LocalReplica(p);
        if (replica == nullptr) {
          held[id];  // Handing over: counted as holding.
          continue;
        }
        for (const ElementDots& e : testing::ReadAllCounted(*replica, set)) {
          held[id].insert(e.element);
        }
      }
      for (const auto& [element, known] : elements) {
        if (known != Known::kPresent) continue;
        int copies = 0;
        for (const auto& [id, have] : held) {
          Replica* replica = sim_->node(id)->LocalReplica(p);
          if (replica == nullptr || have.count(element)) ++copies;
        }
        CAPTURE(seed_, power_, set, element, p, serving, copies);
        if (copies < wo_.w) {
          ++totals_->violations;
          FAIL_CHECK(Describe(*sim_));
        }
      }
    }
  }

  bool Converged(std::string* why) {
    const Ring& ring = sim_->ring();
    for (NodeId id = 1; id <= sim_->node_count(); ++id) {
      Node* node = sim_->node(id);
      const NodeStats s = node->stats();
      if (Stat(s, "handoff.ring_epoch") != ring.epoch() ||
          Stat(s, "handoff.partitions_moving") != 0 ||
          Stat(s, "handoff.pending") != 0 || Stat(s, "handoff.running") != 0 ||
          Stat(s, "handoff.partitions_releasing") != 0) {
        *why = absl::StrCat("node ", id, " still moving");
        return false;
      }
      for (uint32_t p = 0; p < ring.ring_size(); ++p) {
        const std::vector<NodeId>& want = ring.PreferenceList(p);
        if (node->ServingList(p) != want) {
          *why = absl::StrCat("node ", id, " lists p", p, " otherwise");
          return false;
        }
        const bool owns = std::find(want.begin(), want.end(), id) != want.end();
        if (owns && node->LocalReplica(p) == nullptr) {
          *why = absl::StrCat("node ", id, " lacks its replica of p", p);
          return false;
        }
        if (!owns) {
          std::unique_ptr<Iterator> it =
              sim_->store(id)->NewIterator(ReadOptions(), KeyspaceRange(p));
          it->SeekToFirst();
          if (it->Valid()) {
            *why = absl::StrCat("node ", id, " keeps keys of p", p);
            return false;
          }
        }
      }
    }
    for (const auto& [set, elements] : model_.sets) {
      const std::vector<testing::ReplicaView> views =
          testing::Views(*sim_, set);
      for (const testing::ReplicaView& v : views) {
        if (v.value != views.front().value) {
          *why = absl::StrCat("replicas of ", set, " differ");
          return false;
        }
      }
    }
    return true;
  }

  void Settle() {
    if (!late_.empty()) InstallLate();
    sim_->Heal();
    for (const auto& [from, to] : slow_) sim_->SlowLink(from, to, 0);
    slow_.clear();
    slow_for_ = 0;
    sim_->SetLoss(0);
    sim_->SetDuplicate(0);
    if (down_ != 0) REQUIRE(sim_->Restart(down_).ok());
    down_ = 0;
    for (NodeId id = 1; id <= sim_->node_count(); ++id) {
      Harvest(id);
      REQUIRE(sim_->Crash(id).ok());
      REQUIRE(sim_->Restart(id, Uniform(rng_, 0, 1) == 0).ok());
    }
    const uint64_t start = sim_->NowMicros();
    std::string why;
    while (!Converged(&why) && sim_->NowMicros() - start < kSettleBound) {
      sim_->RunFor(kSecond);
    }
    const uint64_t took = sim_->NowMicros() - start;
    INFO("seed " << seed_ << " power " << power_ << ": " << why << "\n"
                 << Describe(*sim_));
    REQUIRE(Converged(&why));
    totals_->slowest_settle = std::max(totals_->slowest_settle, took);
    totals_->total_settle += took;
    // Every replica equals the model (they are equal to each other).
    for (const auto& [set, elements] : model_.sets) {
      const uint32_t p = sim_->ring().PartitionOf(set);
      for (NodeId id : sim_->ring().PreferenceList(p)) {
        CAPTURE(set, id);
        CheckKnown(
            set, testing::ReadAllCounted(*sim_->node(id)->LocalReplica(p), set),
            model_);
        absl::StatusOr<VerifyReport> v =
            sim_->node(id)->LocalReplica(p)->Verify();
        REQUIRE(v.ok());
        CHECK(v->ok());
      }
    }
    for (NodeId id = 1; id <= sim_->node_count(); ++id) Harvest(id);
    ++totals_->histories;
  }

  const uint64_t seed_;
  const bool power_;
  const bool slow_links_;
  const bool storm_;
  const bool partitions_;
  const bool rejoin_;
  Totals* const totals_;
  Rng rng_;
  Rng slow_rng_;
  Rng split_rng_;
  Rng rejoin_rng_;
  int split_for_ = 0;  // Operations until the network heals.
  std::vector<std::pair<NodeId, NodeId>> slow_;  // Links slow now.
  int slow_for_ = 0;
  std::unique_ptr<Simulator> sim_;
  Model model_;
  std::map<std::pair<std::string, std::string>, uint64_t> acked_at_;
  std::map<SentKey, std::vector<SentAdd>> replicated_, given_up_;
  uint64_t last_power_loss_ = 0;
  std::vector<NodeId> members_;
  uint64_t epoch_ = 1;
  std::vector<NodeId> late_;
  std::optional<Ring> late_ring_;
  int late_in_ = 0;
  int check_copies_in_ = 0;
  NodeId down_ = 0;
  int down_for_ = 0;
  ClusterWriteOptions wo_;
  ClusterReadOptions ro_;
};

void Report(const char* name, const Totals& t) {
  WARN(name << ": " << t.histories << " histories, " << t.ops << " ops ("
            << t.acked << " acknowledged, " << t.failed << " failed, "
            << t.failed_over << " adds through a failover), " << t.changes
            << " membership changes (" << t.flaps
            << " seen removed and back by one node first, " << t.rejoins
            << " bringing back a node that had left), " << t.crashes
            << " nodes down (" << t.power_losses << " power losses, "
            << t.clean_stops << " clean stops), " << t.slow_links
            << " slow one-way links (" << t.slow_nodes
            << " of them every link into one node), " << t.splits
            << " network partitions, " << t.copy_checks
            << " single-replica checks, " << t.ack_checks
            << " checks of an acknowledged write's replicas, "
            << t.answer_checks << " acknowledgements checked as they came, "
            << t.transfers << " transfers, " << t.receiver_restarts
            << " runs restarted for a receiver restart; settle: slowest "
            << t.slowest_settle / 1000 << " ms, mean "
            << (t.histories ? t.total_settle / t.histories / 1000 : 0)
            << " ms (bound " << kSettleBound / kSecond
            << " s); violations of the copy and acknowledgement checks: "
            << t.violations);
}

TEST_CASE("lifecycle soak: frequent membership changes and crashes converge") {
  Totals totals;
  for (uint64_t seed : Seeds(4)) {
    History(seed, /*power=*/false, &totals).Run(300);
  }
  Report("lifecycle soak, crashes", totals);
}

TEST_CASE(
    "lifecycle soak: power losses with sync_writes off during changes "
    "converge") {
  Totals totals;
  for (uint64_t seed : Seeds(4)) {
    History(seed, /*power=*/true, &totals).Run(300);
  }
  Report("lifecycle soak, power losses", totals);
}

// Slow one-way links make views lag (the window of "defect: a write
// counted a place through the node that took it ..." in
// membership_attack_test) and replies late. They found the failover limit
// the model follows (an add that switched coordinator may get a second dot
// after a later clear: seed 1592590375).
TEST_CASE(
    "lifecycle soak: slow one-way links (lagging views) with crashes and "
    "power losses during changes converge") {
  Totals totals;
  for (uint64_t seed : Seeds(2)) {
    History(seed, /*power=*/seed % 2 == 1, &totals, /*slow_links=*/true)
        .Run(300);
  }
  Report("lifecycle soak, slow links", totals);
}

TEST_CASE(
    "lifecycle soak: storms (slow nodes, frequent changes, a node down most "
    "of the time) fail writes over while places move") {
  Totals totals;
  std::vector<uint64_t> seeds = Seeds(1);
  // With the given-up defect put back (a leaver answered a given-up
  // question for its place from its cache, its taker never got the chosen
  // delta), this history's acknowledgement check fails: found at
  // BIGSET_TEST_SCALE=30, replayed at every scale.
  if (std::getenv("BIGSET_TEST_SEED") == nullptr) seeds.push_back(1592590354);
  for (uint64_t seed : seeds) {
    History(seed, /*power=*/seed % 2 == 0, &totals, /*slow_links=*/true,
            /*storm=*/true)
        .Run(300);
  }
  Report("lifecycle soak, storms", totals);
}

// Network partitions cut nodes off while places move (a joiner among
// them, before it has a ring that names it): the shape of the liveness
// findings (a write that never answered; a serving list that never
// converged). BIGSET_LIFECYCLE_OPS sets the operations per history.
TEST_CASE(
    "lifecycle soak: network partitions during changes, crashes and power "
    "losses: every request ends, every history settles") {
  int ops = 300;
  if (const char* o = std::getenv("BIGSET_LIFECYCLE_OPS")) ops = std::atoi(o);
  Totals totals;
  for (uint64_t seed : Seeds(3)) {
    History(seed, /*power=*/seed % 2 == 1, &totals, /*slow_links=*/false,
            /*storm=*/false, /*partitions=*/true)
        .Run(ops);
  }
  if (std::getenv("BIGSET_TEST_SEED") == nullptr) {
    // A joiner took two nodes its ring placed, of which it had no state,
    // for two places, though one had taken the other's: it acknowledged an
    // add with its dot in one place (scripts/lifecycle_hunt.sh 30000 30200,
    // 500 operations; the precise check is membership_state_test's "a
    // joiner's guesses from its ring share one place").
    History(1592620396, /*power=*/false, &totals, /*slow_links=*/false,
            /*storm=*/false, /*partitions=*/true)
        .Run(500);
    // A leaver coordinated an add with a list from a view that still had
    // the node that took its place during the write in a place that node
    // had left: the taker's acknowledgement counted as a second place, and
    // the add was acknowledged in one (scripts/lifecycle_hunt.sh 50600
    // 51000 600; the precise check is write_coordinator_test's "defect: a
    // coordinator that handed its place over ...").
    History(1592641156, /*power=*/false, &totals, /*slow_links=*/false,
            /*storm=*/false, /*partitions=*/true)
        .Run(600);
  }
  Report("lifecycle soak, network partitions", totals);
}

// Nodes that left come back (the same id) while the network splits: a
// node leaves a partition and later takes another place in it, and a view
// that missed the first move lists it in the place it left. The shape of
// "defect: a coordinator that handed its place over counted its taker's
// acknowledgement as a second place" (write_coordinator_test), which the
// partition histories found once in 400 of 600 operations.
TEST_CASE(
    "lifecycle soak: nodes that left come back while the network splits: "
    "every request ends, every history settles") {
  int ops = 300;
  if (const char* o = std::getenv("BIGSET_LIFECYCLE_OPS")) ops = std::atoi(o);
  Totals totals;
  for (uint64_t seed : Seeds(2)) {
    History(seed, /*power=*/seed % 2 == 1, &totals, /*slow_links=*/false,
            /*storm=*/false, /*partitions=*/true, /*rejoin=*/true)
        .Run(ops);
  }
  Report("lifecycle soak, nodes back", totals);
}

TEST_CASE(
    "lifecycle soak: the histories that found defects at BIGSET_TEST_SCALE="
    "100 run at every scale") {
  // Found only by the long soak (seeds past CI's scale), replayed at every
  // scale. Later changes of the code may shift a history's timing away
  // from its window: the targeted regression tests named after each defect
  // are the precise checks, these the net.
  struct Found {
    uint64_t seed;
    bool power;
  };
  const Found found[] = {
      // An R = 2 read counted a leaver and the node that took its place as
      // two places and missed a write acknowledged by the other two.
      {1592590526, true},
      // A joiner installed late served as an original member with no data
      // (both kinds of history).
      {1592590527, false},
      {1592590527, true},
      {1592590519, false},
      {1592590519, true},
  };
  Totals totals;
  for (const Found& f : found) History(f.seed, f.power, &totals).Run(300);
  Report("lifecycle soak, histories that found defects", totals);
}

}  // namespace
}  // namespace bigset::testing
