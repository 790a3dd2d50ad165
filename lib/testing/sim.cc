#include "bigset/testing/sim.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bigset/keys/keys.h"
#include "core/status_macros.h"
#include "leveldb/env.h"
#include "leveldb/helpers/memenv.h"

namespace bigset {

class Simulator::SimTransport final : public Transport {
 public:
  explicit SimTransport(Simulator* sim) : sim_(sim) {}
  void Send(NodeId from, NodeId to, std::string bytes) override {
    if (sim_->observer_) sim_->observer_(from, to, bytes);
    sim_->Route(from, to, std::move(bytes));
  }

 private:
  Simulator* sim_;
};

class Simulator::SimScheduler final : public Scheduler {
 public:
  SimScheduler(Simulator* sim, NodeId node) : sim_(sim), node_(node) {}
  uint64_t NowMicros() const override {
    return sim_->NodeNow(*sim_->SlotOf(node_));
  }
  TimerId After(uint64_t delay_micros, std::function<void()> fn) override {
    return sim_->AddTimer(node_, delay_micros, std::move(fn));
  }
  void Cancel(TimerId id) override { sim_->cancelled_timers_.insert(id); }

 private:
  Simulator* sim_;
  NodeId node_;
};

Simulator::Simulator(const SimOptions& options)
    : options_(options),
      rng_(options.seed),
      loss_(options.loss),
      duplicate_(options.duplicate),
      stall_(options.stall),
      corrupt_(options.corrupt),
      min_latency_(options.min_latency_micros),
      max_latency_(
          std::max(options.min_latency_micros, options.max_latency_micros)) {}

Simulator::~Simulator() {
  if (const char* log = std::getenv("BIGSET_SIM_TRACE_LOG")) {
    // Appended, one line per simulation, for comparing two builds' histories.
    if (std::FILE* f = std::fopen(log, "a")) {
      std::fprintf(f, "seed %llu events %llu delivered %llu trace %016llx\n",
                   static_cast<unsigned long long>(options_.seed),
                   static_cast<unsigned long long>(events_),
                   static_cast<unsigned long long>(delivered_),
                   static_cast<unsigned long long>(trace_hash_));
      std::fclose(f);
    }
  }
  // Nodes first (they may hold snapshots and iterators), then stores.
  for (NodeSlot& slot : nodes_) slot.node.reset();
  for (NodeSlot& slot : nodes_) slot.store.reset();
  queue_.clear();
  slab_.clear();
}

absl::StatusOr<std::unique_ptr<Simulator>> Simulator::Create(
    const SimOptions& options) {
  if (options.nodes < 1)
    return absl::InvalidArgumentError("nodes must be >= 1");
  std::unique_ptr<Simulator> sim(new Simulator(options));
  std::vector<NodeId> ids;
  for (int i = 1; i <= options.nodes; ++i)
    ids.push_back(static_cast<NodeId>(i));
  absl::StatusOr<Ring> ring = Ring::Create(ids, options.ring);
  if (!ring.ok()) return ring.status();
  sim->ring_.emplace(std::move(*ring));
  sim->rings_.push_back(*sim->ring_);
  sim->transport_ = std::make_unique<SimTransport>(sim.get());
  sim->nodes_.resize(ids.size());
  for (NodeSlot& slot : sim->nodes_) slot.ring = sim->ring_;
  if (options.directory.empty()) {
    sim->mem_env_.reset(leveldb::NewMemEnv(leveldb::Env::Default()));
  }
  sim->fault_env_ = std::make_unique<FaultEnv>(
      sim->mem_env_ != nullptr ? sim->mem_env_.get() : leveldb::Env::Default());
  for (NodeId id : ids) {
    BIGSET_RETURN_IF_ERROR(sim->StartNode(id));
  }
  if (options.writeback_micros > 0) sim->ScheduleWriteBack();
  return sim;
}

std::string Simulator::StorePath(NodeId id) const {
  return mem_env_ != nullptr ? absl::StrCat("/sim/node", id)
                             : absl::StrCat(options_.directory, "/node", id);
}

uint64_t Simulator::NodeNow(const NodeSlot& slot) const {
  const int64_t t = static_cast<int64_t>(now_) + slot.clock_offset;
  return t < 0 ? 0 : static_cast<uint64_t>(t);
}

absl::Status Simulator::StartNode(NodeId id) {
  NodeSlot& slot = *SlotOf(id);
  LevelDbStoreOptions so = options_.store;
  so.env = fault_env_.get();
  absl::StatusOr<std::unique_ptr<LevelDbStore>> store =
      LevelDbStore::Open(StorePath(id), so);
  if (!store.ok()) return store.status();
  slot.store = std::move(*store);
  slot.scheduler = std::make_unique<SimScheduler>(this, id);
  NodeOptions no = options_.node;
  no.replica.actor_id_source = [this]() {
    ActorId a = 0;
    while (a == 0) a = rng_();
    return a;
  };
  // The new incarnation starts before Node::Open: timers the node sets
  // while opening (e.g. its sweeper's, for queues left from before) are
  // its own.
  ++slot.incarnation;
  absl::StatusOr<std::unique_ptr<Node>> node =
      Node::Open(id, *slot.ring, slot.store.get(), transport_.get(),
                 slot.scheduler.get(), no);
  if (!node.ok()) {
    slot.store.reset();
    return node.status();
  }
  slot.node = std::move(*node);
  slot.up = true;
  slot.busy_until = 0;
  Trace(absl::StrCat("t=", now_, " start node ", id, " incarnation ",
                     slot.incarnation));
  return absl::OkStatus();
}

Node* Simulator::node(NodeId id) {
  NodeSlot* slot = SlotOf(id);
  return slot == nullptr || !slot->up ? nullptr : slot->node.get();
}

Store* Simulator::store(NodeId id) {
  NodeSlot* slot = SlotOf(id);
  return slot == nullptr || !slot->up ? nullptr : slot->store.get();
}

bool Simulator::IsUp(NodeId id) const {
  const NodeSlot* slot = SlotOf(id);
  return slot != nullptr && slot->up;
}

void Simulator::SetLatency(uint64_t min_micros, uint64_t max_micros) {
  min_latency_ = min_micros;
  max_latency_ = std::max(min_micros, max_micros);
}

void Simulator::Partition(const std::vector<std::vector<NodeId>>& groups) {
  group_.assign(nodes_.size(), -1);
  int g = 0;
  for (const auto& group : groups) {
    for (NodeId n : group) {
      if (SlotOf(n) != nullptr) group_[n - 1] = g;
    }
    ++g;
  }
  // Nodes in no group are each alone.
  for (int& group : group_) {
    if (group < 0) group = g++;
  }
  Trace(absl::StrCat("t=", now_, " partition into ", g, " groups"));
}

void Simulator::Heal() {
  group_.clear();
  Trace(absl::StrCat("t=", now_, " heal"));
}

void Simulator::SlowLink(NodeId from, NodeId to, uint64_t extra_micros) {
  if (extra_micros == 0) {
    slow_links_.erase({from, to});
  } else {
    slow_links_[{from, to}] = extra_micros;
  }
  Trace(absl::StrCat("t=", now_, " slow link ", from, "->", to, " +",
                     extra_micros, "us"));
}

absl::Status Simulator::Crash(NodeId id) {
  NodeSlot* found = SlotOf(id);
  if (found == nullptr) return absl::NotFoundError("no such node");
  NodeSlot& slot = *found;
  if (!slot.up) return absl::FailedPreconditionError("node is down");
  slot.node.reset();
  slot.store.reset();
  slot.up = false;
  Trace(absl::StrCat("t=", now_, " crash node ", id));
  return absl::OkStatus();
}

absl::Status Simulator::PowerLoss(NodeId id) {
  BIGSET_RETURN_IF_ERROR(Crash(id));
  absl::StatusOr<uint64_t> lost = fault_env_->DropUnsynced(StorePath(id) + "/");
  if (!lost.ok()) return lost.status();
  ++power_losses_;
  bytes_lost_ += *lost;
  Trace(absl::StrCat("t=", now_, " power loss node ", id, ": ", *lost,
                     " unsynced bytes lost"));
  return absl::OkStatus();
}

absl::Status Simulator::FillDisk(NodeId id, uint64_t bytes) {
  NodeSlot* slot = SlotOf(id);
  if (slot == nullptr) return absl::NotFoundError("no such node");
  fault_env_->FillDiskAfter(StorePath(id) + "/", bytes);
  ++disks_filled_;
  Trace(absl::StrCat("t=", now_, " disk of node ", id, " full after ", bytes,
                     " bytes"));
  return absl::OkStatus();
}

absl::Status Simulator::FreeDisk(NodeId id) {
  if (SlotOf(id) == nullptr) return absl::NotFoundError("no such node");
  fault_env_->FreeSpace(StorePath(id) + "/");
  Trace(absl::StrCat("t=", now_, " disk of node ", id, " has room again"));
  return absl::OkStatus();
}

absl::Status Simulator::Stop(NodeId id) {
  NodeSlot* slot = SlotOf(id);
  if (slot == nullptr) return absl::NotFoundError("no such node");
  if (!slot->up) return absl::FailedPreconditionError("node is down");
  absl::Status s = slot->node->Close();
  slot->node.reset();
  slot->store.reset();
  slot->up = false;
  Trace(absl::StrCat("t=", now_, " stop node ", id));
  return s;
}

absl::Status Simulator::Restart(NodeId id, bool clock_back) {
  NodeSlot* slot = SlotOf(id);
  if (slot == nullptr) return absl::NotFoundError("no such node");
  if (slot->up) return absl::FailedPreconditionError("node is up");
  fault_env_->FreeSpace(StorePath(id) + "/");  // The operator made room.
  if (clock_back) {
    // A monotonic clock restarts at boot: from zero, or from some earlier
    // value.
    const uint64_t was = NodeNow(*slot);
    const uint64_t start =
        std::uniform_int_distribution<int>(0, 3)(rng_) == 0
            ? 0
            : std::uniform_int_distribution<uint64_t>(0, was)(rng_);
    slot->clock_offset =
        static_cast<int64_t>(start) - static_cast<int64_t>(now_);
    Trace(absl::StrCat("t=", now_, " node ", id, " clock back from ", was,
                       " to ", start));
  }
  return StartNode(id);
}

absl::Status Simulator::CompactAll() {
  for (NodeId id = 1; id <= nodes_.size(); ++id) {
    NodeSlot& slot = *SlotOf(id);
    if (!slot.up) continue;
    for (uint32_t p = 0; p < ring_->ring_size(); ++p) {
      if (slot.node->LocalReplica(p) == nullptr) continue;
      BIGSET_RETURN_IF_ERROR(slot.store->CompactRange(KeyspaceRange(p)));
    }
  }
  return absl::OkStatus();
}

const Ring* Simulator::RingOf(NodeId id) const {
  const NodeSlot* slot = SlotOf(id);
  return slot == nullptr || !slot->ring.has_value() ? nullptr : &*slot->ring;
}

absl::Status Simulator::InstallRing(const Ring& ring, std::vector<NodeId> on) {
  if (on.empty()) {
    on = ring.nodes();
    for (NodeId id = 1; id <= nodes_.size(); ++id) {
      if (SlotOf(id)->up) on.push_back(id);
    }
    std::sort(on.begin(), on.end());
    on.erase(std::unique(on.begin(), on.end()), on.end());
  }
  for (NodeId id : on) {
    if (id == nodes_.size() + 1) {
      // Opened with the newest ring given out that does not name it (the
      // initial ring never does).
      const Ring* newest = nullptr;
      for (const Ring& r : rings_) {
        const std::vector<NodeId>& names = r.nodes();
        if (std::find(names.begin(), names.end(), id) != names.end()) continue;
        if (newest == nullptr || r.epoch() > newest->epoch()) newest = &r;
      }
      if (newest == nullptr) {
        return absl::InternalError(
            absl::StrCat("no ring given out leaves out joiner ", id));
      }
      const Ring opened_with = *newest;
      nodes_.emplace_back();
      if (!group_.empty()) {
        group_.push_back(*std::max_element(group_.begin(), group_.end()) + 1);
      }
      // A node joins as an embedder joins one: opened with a ring the
      // cluster ran that leaves it out, then given the ring that adds it.
      // Never one that names it: a new store opened with a ring that
      // places partitions on it serves them at once, as an original
      // member, without their data, and the node whose place it should
      // have taken waits for a joiner forever. The rings the nodes run
      // may all name it (a flap given to one node, then the ring that
      // adds it given to the others first), and so may the ring before
      // the newest: the lifecycle soak hit both (seeds 1592590527 and
      // 1592590519 at BIGSET_TEST_SCALE=100).
      nodes_.back().ring = opened_with;
      Trace(absl::StrCat("t=", now_, " node ", id, " joins at epoch ",
                         ring.epoch()));
      BIGSET_RETURN_IF_ERROR(StartNode(id));
      if (nodes_.back().ring->epoch() == ring.epoch()) continue;
    }
    NodeSlot* slot = SlotOf(id);
    if (slot == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", id, " is neither a node nor the next one"));
    }
    slot->ring = ring;
    Trace(absl::StrCat("t=", now_, " node ", id, " installs ring epoch ",
                       ring.epoch()));
    if (slot->up) {
      BIGSET_RETURN_IF_ERROR(slot->node->InstallRing(ring));
    }
  }
  if (!ring_.has_value() || ring.epoch() > ring_->epoch()) {
    ring_.emplace(ring);
  }
  if (std::none_of(rings_.begin(), rings_.end(),
                   [&](const Ring& r) { return r.epoch() == ring.epoch(); })) {
    rings_.push_back(ring);
  }
  return absl::OkStatus();
}

uint64_t Simulator::Latency() {
  if (max_latency_ == min_latency_) return min_latency_;
  return std::uniform_int_distribution<uint64_t>(min_latency_,
                                                 max_latency_)(rng_);
}

void Simulator::Push(uint64_t time, Event e) {
  if (!e.internal) ++pending_;
  uint32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<uint32_t>(slab_.size());
    slab_.push_back(std::move(e));
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slab_[slot] = std::move(e);
  }
  // Ties run in scheduling order, or (shuffle_ties) in a random one.
  const uint64_t tie = options_.shuffle_ties ? rng_() : next_seq_++;
  queue_.push_back(Scheduled{time, tie, slot});
  std::push_heap(queue_.begin(), queue_.end(), Later());
}

void Simulator::Route(NodeId from, NodeId to, std::string bytes) {
  NodeSlot* dest = SlotOf(to);
  const bool partitioned = dest != nullptr && !group_.empty() &&
                           SlotOf(from) != nullptr &&
                           group_[from - 1] != group_[to - 1];
  if (dest == nullptr || partitioned ||
      (loss_ > 0 && std::uniform_real_distribution<double>()(rng_) < loss_)) {
    ++dropped_;
    return;
  }
  if (corrupt_ > 0 &&
      std::uniform_real_distribution<double>()(rng_) < corrupt_) {
    Corrupt(&bytes);
  }
  const bool dup = duplicate_ > 0 &&
                   std::uniform_real_distribution<double>()(rng_) < duplicate_;
  for (int copy = 0; copy < (dup ? 2 : 1); ++copy) {
    Event e;
    uint64_t time = now_ + Latency();
    if (!slow_links_.empty()) {
      auto slow = slow_links_.find({from, to});
      if (slow != slow_links_.end()) time += slow->second;
    }
    if (stall_ > 0 && std::uniform_real_distribution<double>()(rng_) < stall_) {
      ++stalled_;
      time += std::uniform_int_distribution<uint64_t>(
          0, options_.stall_max_micros)(rng_);
    }
    if (options_.fifo_links) {
      // Strictly after the link's previous message, also when ties are
      // shuffled.
      uint64_t& last = link_arrivals_[{from, to}];
      time = std::max(time, last + 1);
      last = time;
    }
    e.is_message = true;
    e.from = from;
    e.to = to;
    e.incarnation = dest->incarnation;
    e.bytes = copy == 0 && !dup ? std::move(bytes) : bytes;
    Push(time, std::move(e));
  }
}

void Simulator::ScheduleWriteBack() {
  Event e;
  e.internal = true;
  e.fn = [this]() {
    fault_env_->WriteBack();
    ScheduleWriteBack();
  };
  Push(now_ + options_.writeback_micros, std::move(e));
}

void Simulator::Corrupt(std::string* bytes) {
  ++corrupted_;
  if (bytes->empty()) return;
  if (std::uniform_int_distribution<int>(0, 1)(rng_) == 0) {
    bytes->resize(
        std::uniform_int_distribution<size_t>(0, bytes->size() - 1)(rng_));
    return;
  }
  for (int i = 0, n = std::uniform_int_distribution<int>(1, 3)(rng_); i < n;
       ++i) {
    const size_t at =
        std::uniform_int_distribution<size_t>(0, bytes->size() - 1)(rng_);
    (*bytes)[at] = static_cast<char>(
        (*bytes)[at] ^ (1 << std::uniform_int_distribution<int>(0, 7)(rng_)));
  }
}

uint64_t Simulator::AddTimer(NodeId node, uint64_t delay,
                             std::function<void()> fn) {
  if (options_.timer_jitter_micros > 0) {
    delay += std::uniform_int_distribution<uint64_t>(
        0, options_.timer_jitter_micros)(rng_);
  }
  Event e;
  e.to = node;
  e.incarnation = SlotOf(node)->incarnation;
  e.fn = std::move(fn);
  e.timer_id = next_timer_++;
  uint64_t id = e.timer_id;
  Push(now_ + delay, std::move(e));
  return id;
}

bool Simulator::Step() {
  // The simulator's own recurring events (writeback) do not keep it busy.
  if (pending_ == 0) return false;
  return StepOne();
}

bool Simulator::StepOne() {
  if (queue_.empty()) return false;
  std::pop_heap(queue_.begin(), queue_.end(), Later());
  const Scheduled next = queue_.back();
  queue_.pop_back();
  // Moved out: handling it may schedule more events into the slab.
  Event event = std::move(slab_[next.slot]);
  free_slots_.push_back(next.slot);
  Event* e = &event;
  if (!e->internal) --pending_;
  now_ = std::max(now_, next.time);
  ++events_;
  if (e->internal) {
    e->fn();
    return true;
  }
  NodeSlot& slot = *SlotOf(e->to);
  // A crashed node, or one restarted since, gets nothing sent to (or
  // scheduled by) its former self.
  const bool alive = slot.up && slot.incarnation == e->incarnation;
  if (alive && slot.busy_until > now_) {
    // The node is still at earlier work: this waits its turn.
    Push(slot.busy_until, std::move(event));
    return true;
  }
  const bool costs =
      options_.message_cost_micros != 0 || options_.sync_cost_micros != 0;
  const uint64_t syncs_before = costs ? fault_env_->LogSyncs() : 0;
  const NodeId handler = e->to;
  const uint64_t incarnation = slot.incarnation;
  absl::Cleanup charge = [&, this]() {
    if (!costs || !alive) return;
    NodeSlot* s = SlotOf(handler);
    if (s == nullptr || !s->up || s->incarnation != incarnation) return;
    s->busy_until =
        now_ + (e->is_message ? options_.message_cost_micros : 0) +
        (fault_env_->LogSyncs() - syncs_before) * options_.sync_cost_micros;
  };
  if (e->is_message) {
    if (!alive || (!group_.empty() && SlotOf(e->from) != nullptr &&
                   group_[e->from - 1] != group_[e->to - 1])) {
      ++dropped_;
      return true;
    }
    ++delivered_;
    bytes_delivered_ += e->bytes.size();
    // The header (type, request id, partition), the last bytes and the
    // size identify a message well enough; hashing whole read chunks would
    // cost more than delivering them.
    uint64_t head = 0, tail = 0;
    std::memcpy(&head, e->bytes.data(), std::min<size_t>(8, e->bytes.size()));
    if (e->bytes.size() >= 8) {
      std::memcpy(&tail, e->bytes.data() + e->bytes.size() - 8, 8);
    }
    const uint64_t digest = (head * 0x9e3779b97f4a7c15ull) ^
                            (tail * 0xc2b2ae3d27d4eb4full) ^ e->bytes.size();
    if (options_.trace_capacity == 0) {
      trace_hash_ = (trace_hash_ ^ digest) * 0x100000001b3ull + now_;
    } else {
      Trace(absl::StrCat("t=", now_, " ", e->from, "->", e->to, " ",
                         DescribeMessage(e->bytes), " #", digest & 0xffff));
    }
    slot.node->Receive(e->from, e->bytes);
  } else {
    if (!alive || cancelled_timers_.erase(e->timer_id)) return true;
    trace_hash_ = trace_hash_ * 31 + e->to * 7 + now_;  // Timers count too.
    e->fn();
  }
  return true;
}

uint64_t Simulator::RunUntilIdle(uint64_t max_events) {
  uint64_t n = 0;
  while (n < max_events && Step()) ++n;
  return n;
}

bool Simulator::RunUntil(const std::function<bool()>& pred) {
  while (!pred()) {
    if (!Step()) return pred();
  }
  return true;
}

void Simulator::RunFor(uint64_t micros) {
  const uint64_t until = now_ + micros;
  while (!queue_.empty() && queue_.front().time <= until) StepOne();
  now_ = std::max(now_, until);
}

void Simulator::Trace(std::string line) {
  trace_hash_ = StableHash(absl::StrCat(trace_hash_, "|", line));
  if (options_.trace_capacity == 0) return;
  trace_.push_back(std::move(line));
  while (trace_.size() > options_.trace_capacity) trace_.pop_front();
}

std::vector<std::string> Simulator::TraceTail() const {
  return std::vector<std::string>(trace_.begin(), trace_.end());
}

// ---- Blocking client API.

namespace {
absl::Status NodeDown(NodeId id) {
  return absl::UnavailableError(absl::StrCat("node ", id, " is down"));
}
constexpr char kUnanswered[] = "unanswered: ";
std::string Request(const char* kind, std::string_view set, NodeId via) {
  return absl::StrCat(kind, " of set \"", std::string(set), "\" via node ",
                      via);
}
}  // namespace

bool Simulator::IsUnanswered(const absl::Status& status) {
  return absl::IsDeadlineExceeded(status) &&
         absl::StartsWith(status.message(), kUnanswered);
}

absl::Status Simulator::AwaitAnswer(const std::function<bool()>& answered,
                                    const std::function<uint64_t()>& deadline,
                                    const std::string& what, uint64_t started) {
  while (!answered()) {
    if (!Step()) {
      if (answered()) break;
      return absl::InternalError(absl::StrCat(
          "simulation ran out of events before the answer of ", what));
    }
    if (answered()) break;
    const uint64_t due = deadline() + options_.answer_margin_micros;
    if (now_ > due) {
      return absl::DeadlineExceededError(absl::StrCat(
          kUnanswered, what, ", started at t=", started, " us, has no answer ",
          options_.answer_margin_micros, " us after its deadline (t=", now_,
          " us): a request that never ends"));
    }
  }
  return absl::OkStatus();
}

template <typename T, typename StartFn>
absl::StatusOr<T> Simulator::Ask(NodeId via, const char* what,
                                 std::string_view set, uint64_t timeout_micros,
                                 StartFn start_request) {
  Node* n = node(via);
  if (n == nullptr) return NodeDown(via);
  std::optional<absl::StatusOr<T>> result;
  const uint64_t start = now_;
  start_request(*n, [&result](absl::StatusOr<T> r) { result = std::move(r); });
  absl::Status s = AwaitAnswer([&result]() { return result.has_value(); },
                               [&]() { return start + timeout_micros; },
                               Request(what, set, via), start);
  if (!s.ok()) return s;
  return std::move(*result);
}

absl::StatusOr<Delta> Simulator::Update(NodeId via, std::string_view set,
                                        std::vector<UpdateOp> ops,
                                        const ClusterWriteOptions& options) {
  return Ask<Delta>(via, "update", set, options.timeout_micros,
                    [&](Node& n, auto done) {
                      n.Update(set, std::move(ops), options, std::move(done));
                    });
}

absl::StatusOr<Delta> Simulator::Clear(NodeId via, std::string_view set,
                                       const Clock& context,
                                       const ClusterWriteOptions& options) {
  return Ask<Delta>(via, "clear", set, options.timeout_micros,
                    [&](Node& n, auto done) {
                      n.Clear(set, context, options, std::move(done));
                    });
}

namespace {
class CollectingHandler final : public ReadHandler {
 public:
  CollectingHandler(const uint64_t* now_micros, uint64_t* violations)
      : now(now_micros), progress(*now_micros), violations_(violations) {}

  // What ReadHandler promises: OnClock once, then the chunks, then OnDone
  // (which may come without a clock only on error).
  void OnClock(const Clock& clock) override {
    if (clocked_ || status.has_value()) ++*violations_;
    clocked_ = true;
    progress = *now;
    result.clock = clock;
    // A good guess of the size: every element holds at least one dot.
    result.elements.reserve(std::min<uint64_t>(clock.DotCount(), 1 << 22));
  }
  void OnChunk(std::vector<ElementDots>* elements,
               std::function<void()> next) override {
    if (!clocked_ || status.has_value()) ++*violations_;
    progress = *now;
    for (ElementDots& e : *elements) result.elements.push_back(std::move(e));
    next();
  }
  void OnDone(absl::Status s) override {
    if (status.has_value() || (s.ok() && !clocked_)) ++*violations_;
    status = s;
  }

  const uint64_t* const now;  // The simulation's time.
  uint64_t progress;          // When the read last moved on (or started).
  SimReadResult result;
  std::optional<absl::Status> status;

 private:
  uint64_t* const violations_;
  bool clocked_ = false;
};
}  // namespace

absl::StatusOr<SimReadResult> Simulator::Read(NodeId via, std::string_view set,
                                              const ClusterReadOptions& options,
                                              const RangeQuery* bounds) {
  Node* n = node(via);
  if (n == nullptr) return NodeDown(via);
  const uint64_t start = now_;
  CollectingHandler handler(&now_, &read_contract_violations_);
  n->Read(set, options, &handler, bounds);
  absl::Status s =
      AwaitAnswer([&handler]() { return handler.status.has_value(); },
                  [&]() { return handler.progress + options.timeout_micros; },
                  Request("read", set, via), start);
  if (!s.ok()) return s;
  if (!handler.status->ok()) return *handler.status;
  return std::move(handler.result);
}

absl::StatusOr<Membership> Simulator::ContainsAll(
    NodeId via, std::string_view set, std::vector<std::string> elements,
    const ClusterReadOptions& options) {
  return Ask<Membership>(via, "membership query", set, options.timeout_micros,
                         [&](Node& n, auto done) {
                           n.ContainsAll(set, std::move(elements), options,
                                         std::move(done));
                         });
}

absl::StatusOr<RangeResult> Simulator::Range(
    NodeId via, std::string_view set, const RangeQuery& query,
    const ClusterReadOptions& options) {
  return Ask<RangeResult>(via, "range read", set, options.timeout_micros,
                          [&](Node& n, auto done) {
                            n.Range(set, query, options, std::move(done));
                          });
}

absl::StatusOr<uint64_t> Simulator::Count(NodeId via, std::string_view set,
                                          const ClusterReadOptions& options) {
  return Ask<uint64_t>(
      via, "count", set, options.timeout_micros,
      [&](Node& n, auto done) { n.Count(set, options, std::move(done)); });
}

}  // namespace bigset
