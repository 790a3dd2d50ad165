#include "handoff_util.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "net/message.h"
#include "test_util.h"

namespace bigset::testing {

void CheckKnown(const std::string& set, const std::vector<ElementDots>& read,
                const KnownModel& model) {
  std::set<std::string> present;
  for (const ElementDots& e : read) present.insert(e.element);
  auto it = model.sets.find(set);
  if (it == model.sets.end()) return;
  auto haunted = model.may_return.find(set);
  for (const auto& [element, known] : it->second) {
    CAPTURE(set, element);
    if (known == Known::kPresent) CHECK(present.count(element) == 1);
    if (known == Known::kAbsent && (haunted == model.may_return.end() ||
                                    haunted->second.count(element) == 0)) {
      CHECK(present.count(element) == 0);
    }
  }
}

SimOptions ChunkedClusterOptions(uint64_t seed, int nodes, uint32_t ring_size,
                                 int n, size_t chunk_elements) {
  SimOptions o;
  o.seed = seed;
  o.nodes = nodes;
  o.ring = RingOptions{ring_size, n, 1, Placement::kRendezvous};
  o.node.service.max_chunk_elements = chunk_elements;
  o.node.handoff.chunk_elements = chunk_elements;
  o.node.anti_entropy.chunk_elements = chunk_elements;
  return o;
}

std::unique_ptr<Simulator> SmallMovingCluster(uint64_t seed, bool sync_writes,
                                              bool late) {
  SimOptions o = ChunkedClusterOptions(seed, 3, 8, 2, 3);
  o.node.handoff.max_running = 1;
  o.node.replica.sync_writes = sync_writes;
  o.min_latency_micros = 500;
  o.max_latency_micros = 3000;
  o.trace_capacity = 100;
  if (late) {
    o.stall = 0.03;
    o.stall_max_micros = 3'000'000;
    o.duplicate = 0.05;
    o.shuffle_ties = true;
  }
  auto created = Simulator::Create(o);
  REQUIRE(created.ok());
  return std::move(*created);
}

const std::vector<std::string>& WriterSets() {
  static const std::vector<std::string> names = {"a", "b", "c", "d",
                                                 "e", "f", "g", "h"};
  return names;
}

KnownWriter::KnownWriter(Simulator* sim, KnownModel* model, uint64_t seed,
                         int w)
    : sim_(sim), model_(model), rng_(seed), w_(w) {}

void KnownWriter::Op() {
  const auto& names = WriterSets();
  const std::string& set = names[Uniform(rng_, 0, names.size() - 1)];
  const std::string element = absl::StrCat("x", Uniform(rng_, 0, 40));
  Known& known =
      model_->sets[set].try_emplace(element, Known::kAbsent).first->second;
  const NodeId via = Up();
  ClusterWriteOptions wo;
  wo.w = w_;
  wo.timeout_micros = 3'000'000;
  if (Uniform(rng_, 0, 3) > 0) {
    absl::StatusOr<Delta> d =
        sim_->Update(via, set, {UpdateOp::Add(element)}, wo);
    if (d.ok()) {
      known = Known::kPresent;
    } else if (known != Known::kPresent) {
      known = Known::kUnknown;
    }
    return;
  }
  // The remove's context from every serving replica (R = N = 2): it sees
  // every acknowledged add (with a replica down it fails, and nothing is
  // removed).
  ClusterReadOptions ro;
  ro.r = 2;
  ro.read_repair = false;
  absl::StatusOr<Membership> m = sim_->ContainsAll(via, set, {element}, ro);
  if (!m.ok()) return;
  if (known == Known::kPresent) CHECK(m->all_present);
  std::vector<Dot> context;
  for (const ElementDots& e : m->elements) {
    context.insert(context.end(), e.dots.begin(), e.dots.end());
  }
  absl::StatusOr<Delta> d =
      sim_->Update(via, set, {UpdateOp::Remove(element, context)}, wo);
  if (!d.ok()) {
    known = Known::kUnknown;
  } else if (known != Known::kUnknown) {
    known = Known::kAbsent;
  }
}

NodeId KnownWriter::Up() {
  std::vector<NodeId> up;
  for (NodeId id = 1; id <= sim_->node_count(); ++id) {
    if (sim_->IsUp(id)) up.push_back(id);
  }
  REQUIRE(!up.empty());
  return up[Uniform(rng_, 0, up.size() - 1)];
}

bool StepUntil(Simulator& sim, uint64_t max_micros,
               const std::function<bool()>& pred) {
  const uint64_t until = sim.NowMicros() + max_micros;
  while (!pred()) {
    if (sim.NowMicros() >= until) return false;
    if (!sim.Step()) return pred();
  }
  return true;
}

void QuietNetwork(Simulator& sim) {
  sim.SetLoss(0);
  sim.SetDuplicate(0);
  sim.SetCorruption(0);
  sim.SetStall(0);
}

void HealAndRestartAll(Simulator& sim) {
  sim.Heal();
  QuietNetwork(sim);
  for (NodeId id = 1; id <= sim.node_count(); ++id) {
    if (!sim.IsUp(id)) REQUIRE(sim.Restart(id, /*clock_back=*/true).ok());
  }
}

std::vector<TracedMessage> TracedMessages(const Simulator& sim) {
  std::vector<TracedMessage> out;
  for (const std::string& line : sim.TraceTail()) {
    unsigned long long t = 0, id = 0;
    unsigned from = 0, to = 0, p = 0;
    char type[32] = {0};
    if (std::sscanf(line.c_str(), "t=%llu %u->%u %31s #%llu p%u", &t, &from,
                    &to, type, &id, &p) != 6) {
      continue;
    }
    out.push_back({t, from, to, type, id, p});
  }
  return out;
}

void DumpTrace(const Simulator& sim, size_t lines) {
  const std::vector<std::string> tail = sim.TraceTail();
  for (size_t i = tail.size() > lines ? tail.size() - lines : 0;
       i < tail.size(); ++i) {
    UNSCOPED_INFO(tail[i]);
  }
}

void CheckReadsKnown(Simulator& sim, const std::vector<std::string>& sets,
                     const KnownModel& model, const ClusterReadOptions& base) {
  const Ring& ring = sim.ring();
  ClusterReadOptions all = base;
  all.r = ring.n();
  all.read_repair = true;
  for (const std::string& set : sets) {
    absl::StatusOr<SimReadResult> r = sim.Read(ring.nodes().front(), set, all);
    REQUIRE(r.ok());
    CheckKnown(set, r->elements, model);
  }
}

void OnAcceptance(Simulator& sim, NodeId taker, NodeId giver, uint32_t p,
                  std::function<void()> on_accept) {
  sim.SetSendObserver([=](NodeId from, NodeId to, std::string_view bytes) {
    if (from != taker || to != giver) return;
    absl::StatusOr<Message> m = DecodeMessage(bytes);
    if (!m.ok() || m->header.partition != p) return;
    const auto* ack = m->As<msg::HandoffDoneAck>();
    if (ack != nullptr && ack->status.ok()) on_accept();
  });
}

void CheckReplicasKnown(Simulator& sim, const std::vector<std::string>& sets,
                        const KnownModel& model) {
  const Ring& ring = sim.ring();
  for (const std::string& set : sets) {
    const uint32_t p = ring.PartitionOf(set);
    for (NodeId id : ring.PreferenceList(p)) {
      CAPTURE(set, id);
      Replica* replica = sim.node(id)->LocalReplica(p);
      REQUIRE(replica != nullptr);
      CheckKnown(set, ReadAllCounted(*replica, set), model);
    }
  }
}

void CheckPlacedAsRingSays(Simulator& sim) {
  const Ring& ring = sim.ring();
  for (NodeId id = 1; id <= sim.node_count(); ++id) {
    Node* node = sim.node(id);
    REQUIRE(node != nullptr);
    for (uint32_t p = 0; p < ring.ring_size(); ++p) {
      CAPTURE(id, p);
      const auto& list = ring.PreferenceList(p);
      CHECK(node->ServingList(p) == list);
      if (std::find(list.begin(), list.end(), id) != list.end()) {
        Replica* replica = node->LocalReplica(p);
        REQUIRE(replica != nullptr);
        absl::StatusOr<VerifyReport> v = replica->Verify();
        REQUIRE(v.ok());
        CHECK(v->ok());
      } else {
        CHECK(node->LocalReplica(p) == nullptr);
        std::unique_ptr<Iterator> it =
            sim.store(id)->NewIterator(ReadOptions(), KeyspaceRange(p));
        it->SeekToFirst();
        CHECK_FALSE(it->Valid());
      }
    }
  }
}

std::string Unsettled(Simulator& sim) {
  std::string out;
  const Ring& ring = sim.ring();
  for (NodeId id = 1; id <= sim.node_count(); ++id) {
    Node* node = sim.node(id);
    if (node == nullptr) continue;
    const NodeStats s = node->stats();
    if (Stat(s, "handoff.ring_epoch") == ring.epoch() &&
        Stat(s, "handoff.partitions_moving") == 0 &&
        Stat(s, "handoff.pending") == 0 && Stat(s, "handoff.running") == 0 &&
        Stat(s, "handoff.partitions_releasing") == 0) {
      continue;
    }
    absl::StrAppend(
        &out, "node ", id, ": epoch ", Stat(s, "handoff.ring_epoch"),
        ", moving ", Stat(s, "handoff.partitions_moving"), ", pending ",
        Stat(s, "handoff.pending"), ", running ", Stat(s, "handoff.running"),
        ", releasing ", Stat(s, "handoff.partitions_releasing"), "\n");
    for (uint32_t p = 0; p < ring.ring_size(); ++p) {
      if (node->ServingList(p) == ring.PreferenceList(p)) continue;
      absl::StrAppend(&out, "  p", p, " serving");
      for (NodeId n : node->ServingList(p)) absl::StrAppend(&out, " ", n);
      absl::StrAppend(&out, ", ring");
      for (NodeId n : ring.PreferenceList(p)) absl::StrAppend(&out, " ", n);
      absl::StrAppend(&out, "\n");
    }
  }
  return out;
}

bool SettleWithin(Simulator& sim, uint64_t bound) {
  const uint64_t deadline = sim.NowMicros() + bound;
  while (!Settled(sim) && sim.NowMicros() < deadline) sim.RunFor(100'000);
  return Settled(sim);
}

void SettleOrFail(Simulator& sim, uint64_t bound) {
  const bool settled = SettleWithin(sim, bound);
  INFO(Unsettled(sim));
  REQUIRE(settled);
}

}  // namespace bigset::testing
