// Node::Impl's client requests (node_impl.h): their entry points, the
// driver of the request state machines (Carry) and the answers it gives
// from the scheduler, and the write tick.

#include <algorithm>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cluster/node_impl.h"
#include "cluster/read_sink.h"

namespace bigset {

// ---- Client entry points.

absl::Status Node::Impl::Refusal(int quorum, const char* name) const {
  if (closed_) return NodeClosedError();
  if (quorum < 1 || quorum > ring().n()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be in [1, n]"));
  }
  return absl::OkStatus();
}

void Node::Impl::Update(std::string_view set, std::vector<UpdateOp> ops,
                        std::optional<Clock> clear,
                        const ClusterWriteOptions& options,
                        std::function<void(absl::StatusOr<Delta>)> done) {
  if (Refused(options.w, "w", done)) return;
  const uint64_t id = NextRequestId();
  const bool is_clear = clear.has_value();
  const uint32_t partition = ring().PartitionOf(set);
  std::unique_ptr<WriteCoordinator> op = requests_.TakeIdleWrite();
  if (op == nullptr) op = std::make_unique<WriteCoordinator>();
  op->Reset(id, set,
            WriteCoordinator::Where{.partition = partition,
                                    .serving = ServingList(partition),
                                    .places = ServingPlaces(partition),
                                    .self = id_},
            std::move(ops), std::move(clear), options, std::move(done));
  WriteCoordinator* raw = requests_.Add(std::move(op));
  write_tick_micros_ = write_tick_micros_ == 0
                           ? options.retry_micros
                           : std::min(write_tick_micros_, options.retry_micros);
  Carry<WriteCoordinator>(id, raw->Start(scheduler_->NowMicros()),
                          /*in_client_call=*/true);
  EnsureWriteTick();
  if (is_clear) EnsureSweepTick(partition);
}

void Node::Impl::StartRead(std::string_view set,
                           const ClusterReadOptions& options,
                           ElementBounds bounds, size_t limit,
                           std::unique_ptr<ReadSink> sink) {
  absl::Status refused = Refusal(options.r, "r");
  if (refused.ok() && options.batch_size == 0) {
    refused = absl::InvalidArgumentError("batch_size must be >= 1");
  }
  if (!refused.ok()) {
    sink->OnDone(std::move(refused));
    return;
  }
  const uint64_t id = NextRequestId();
  const uint32_t partition = ring().PartitionOf(set);
  ReadCoordinator* op = requests_.Add(std::make_unique<ReadCoordinator>(
      id, std::string(set),
      ReadCoordinator::Where{.partition = partition,
                             .serving = ServingList(partition),
                             .places = ServingPlaces(partition)},
      options, std::move(bounds), limit, std::move(sink)));
  CarryRead(id, op->Start(scheduler_->NowMicros()));
}

QuorumReadSetup Node::Impl::QuorumReadAt(std::string_view set) const {
  QuorumReadSetup setup;
  setup.partition = ring().PartitionOf(set);
  setup.serving = ServingList(setup.partition);
  setup.places = ServingPlaces(setup.partition);
  setup.self = node_id();
  setup.now = scheduler_->NowMicros();
  return setup;
}

void Node::Impl::CarrySends(RequestOutput& out) {
  for (RequestOutput::Send& send : out.sends) {
    if (send.first) {
      SendFirst(send.to, std::move(send.bytes));
    } else {
      Send(send.to, std::move(send.bytes));
    }
  }
  stats_.retransmits += out.retransmits;
  stats_.queries_hedged += out.queries_hedged;
  stats_.repairs_sent += out.repairs_sent;
  stats_.repair_ops_sent += out.repair_ops_sent;
  stats_.coordinator_switches += out.coordinator_switches;
  stats_.late_coordinator_replies += out.late_coordinator_replies;
  stats_.extra_dots += out.extra_dots;
  stats_.failovers_unsettled += out.failovers_unsettled;
  stats_.failovers_refused += out.failovers_refused;
  stats_.malformed_messages += out.malformed_messages;
  stats_.read_replica_switches += out.read_replica_switches;
  for (const RequestOutput::Hint& hint : out.hints) {
    // A replica never acknowledged the delta: anti-entropy resends it.
    CarryProtocol(&anti_entropy_, anti_entropy_.AddHint(
                                      hint.to, hint.partition, hint.request_id,
                                      hint.bytes, scheduler_->NowMicros()));
  }
  for (uint64_t sub : out.unroutes) requests_.Unroute(sub);
  for (const RequestOutput::SlowPeer& peer : out.slow) {
    if (peer.every_partition) {
      slow_replicas_.Mark(peer.node, scheduler_->NowMicros());
    } else {
      slow_replicas_.MarkFailed(peer.node, peer.partition,
                                scheduler_->NowMicros());
    }
  }
}

template <typename T>
void Node::Impl::Carry(uint64_t id, RequestOutput out, bool in_client_call) {
  CarrySends(out);
  const uint64_t now = scheduler_->NowMicros();
  // A send to this node itself may have finished the request meanwhile.
  T* op = requests_.Find<T>(id);
  if (op == nullptr) return;
  std::optional<decltype(op->TakeAnswer())> answer;
  if (out.answered || out.done) answer.emplace(op->TakeAnswer());
  if (out.done) {
    requests_.Finish(id);  // Destroys op.
  } else {
    if constexpr (std::is_same_v<T, WriteCoordinator>) {
      CarryWriteEffects(op, out, in_client_call);
    }
    if (out.tick_at != 0) {
      After(out.tick_at > now ? out.tick_at - now : 0, [this, id]() {
        if (T* due = requests_.Find<T>(id)) {
          Carry<T>(id, due->Tick(scheduler_->NowMicros()));
        }
      });
    }
  }
  if (!answer.has_value()) return;
  if (in_client_call) {
    // Never from inside the client's own call.
    AnswerLater(&due_writes_, id, std::move(*answer));
  } else {
    (*answer)();
  }
}

void Node::Impl::CarryWriteEffects(WriteCoordinator* op,
                                   const RequestOutput& out,
                                   bool in_client_call) {
  const uint64_t id = op->id();
  for (uint32_t i = 0; i < out.extras_to_number; ++i) {
    const uint64_t sub = NextRequestId();
    requests_.Route(sub, id);
    Carry<WriteCoordinator>(id, op->NumberExtra(sub, scheduler_->NowMicros()),
                            in_client_call);
    op = requests_.Find<WriteCoordinator>(id);
    if (op == nullptr) return;
  }
  if (!out.coordinate_here) return;
  // This node's own replica coordinates: no message round trip.
  absl::StatusOr<Delta> delta = absl::UnavailableError("no local replica");
  if (Replica* replica = LocalReplica(op->partition())) {
    delta = op->clear().has_value() ? replica->Clear(op->set(), *op->clear())
                                    : replica->Update(op->set(), op->ops());
    if (delta.ok()) {
      CarryProtocol(&handoff_, handoff_.OnApplied(op->partition(), *delta,
                                                  scheduler_->NowMicros()));
    }
  }
  Carry<WriteCoordinator>(id, op->Coordinated(std::move(delta)),
                          in_client_call);
}

void Node::Impl::CarryRead(uint64_t id, RequestOutput out) {
  for (;;) {
    CarrySends(out);
    // A send to this node itself may have finished the read meanwhile.
    ReadCoordinator* op = requests_.Find<ReadCoordinator>(id);
    if (op == nullptr) return;
    // The client's callbacks may call into the node (and close it). Its
    // clock comes first, also when the read ends in the same input (the
    // last clock brought the whole set).
    if (out.clock_ready) {
      op->sink()->OnClock(op->merged_clock());
      op = requests_.Find<ReadCoordinator>(id);
      if (op == nullptr) return;
    }
    if (out.done) {
      ReadCoordinator::Answer answer = op->TakeAnswer();
      requests_.Finish(id);  // Destroys op.
      answer();
      return;
    }
    for (const RequestOutput::Fold& fold : out.folds_to_open) {
      const uint64_t fold_id = NextRequestId();
      std::unique_ptr<SetReader> local;
      if (fold.node == id_) {
        // This node's own replica is read in-process.
        if (Replica* replica = ReadableReplica(op->partition())) {
          SetReadOptions ro;
          ro.batch_size = op->batch_size();
          ro.bounds = fold.bounds;
          absl::StatusOr<std::unique_ptr<SetReader>> reader =
              replica->Read(op->set(), ro);
          if (reader.ok()) local = *std::move(reader);
        }
      }
      if (local == nullptr) requests_.Route(fold_id, id);
      CarryRead(id, op->FoldOpened(fold.slot, fold_id, std::move(local),
                                   scheduler_->NowMicros()));
      op = requests_.Find<ReadCoordinator>(id);
      if (op == nullptr) return;
    }
    for (uint64_t fold_id : out.local_clocks) {
      ReadLater(id, 0, [fold_id](ReadCoordinator& read, uint64_t now) {
        return read.LocalClock(fold_id, now);
      });
    }
    if (out.tick_at != 0) {
      const uint64_t now = scheduler_->NowMicros();
      ReadLater(
          id, out.tick_at > now ? out.tick_at - now : 0,
          [](ReadCoordinator& read, uint64_t at) { return read.Tick(at); });
    }
    if (!out.chunk_ready) return;
    const bool go_on =
        op->sink()->OnChunk(op->chunk(), ReadNext(id, op->token()));
    op = requests_.Find<ReadCoordinator>(id);
    if (op == nullptr || !go_on) return;
    out = op->ClientNext(scheduler_->NowMicros());
  }
}

std::function<void()> Node::Impl::ReadNext(uint64_t id,
                                           std::weak_ptr<bool> token) {
  // The token expires with the read, which this node owns: while it
  // lives, so does the node.
  return [this, id, token = std::move(token)]() {
    if (token.expired()) return;
    // Never inside the client's call.
    ReadLater(id, 0, [](ReadCoordinator& read, uint64_t now) {
      return read.ClientNext(now);
    });
  };
}

void Node::Impl::ReadLater(
    uint64_t id, uint64_t delay_micros,
    std::function<RequestOutput(ReadCoordinator&, uint64_t)> step) {
  After(delay_micros, [this, id, step = std::move(step)]() {
    if (ReadCoordinator* read = requests_.Find<ReadCoordinator>(id)) {
      CarryRead(id, step(*read, scheduler_->NowMicros()));
    }
  });
}

void Node::Impl::ContainsAll(
    std::string_view set, std::vector<std::string> elements,
    const ClusterReadOptions& options,
    std::function<void(absl::StatusOr<Membership>)> done) {
  if (Refused(options.r, "r", done)) return;
  const uint64_t id = NextRequestId();
  QuorumReadSetup setup = QuorumReadAt(set);
  const uint64_t now = setup.now;
  QueryCoordinator* op = requests_.Add(std::make_unique<QueryCoordinator>(
      id, std::string(set), std::move(setup), std::move(elements), options,
      std::move(done)));
  Carry<QueryCoordinator>(id, op->Start(now, slow_replicas_));
}

void Node::Impl::Count(std::string_view set, const ClusterReadOptions& options,
                       std::function<void(absl::StatusOr<uint64_t>)> done) {
  if (Refused(options.r, "r", done)) return;
  const uint64_t id = NextRequestId();
  QuorumReadSetup setup = QuorumReadAt(set);
  const uint64_t now = setup.now;
  CountCoordinator* op = requests_.Add(std::make_unique<CountCoordinator>(
      id, std::string(set), std::move(setup), options,
      [this, set = std::string(set), options, done = std::move(done)](
          absl::StatusOr<std::optional<uint64_t>> agreed) mutable {
        if (!agreed.ok()) {
          done(agreed.status());
        } else if (agreed->has_value()) {
          ++stats_.counts_agreed;
          done(**agreed);
        } else {
          // The replicas differ: count what a merged read returns.
          ++stats_.counts_merged;
          StartRead(set, options, ElementBounds(), 0,
                    NewCountSink(std::move(done)));
        }
      }));
  Carry<CountCoordinator>(id, op->Start(now));
}

void Node::Impl::ClearNothing(std::string_view set,
                              std::function<void(absl::StatusOr<Delta>)> done) {
  if (closed_) {
    done(NodeClosedError());
    return;
  }
  Delta nothing;
  nothing.set.assign(set);
  AnswerLater(&due_clears_, next_empty_clear_++,
              [nothing = std::move(nothing), done = std::move(done)]() mutable {
                done(std::move(nothing));
              });
}

void Node::Impl::AnswerLater(std::map<uint64_t, std::function<void()>>* due,
                             uint64_t key, std::function<void()> answer) {
  due->emplace(key, std::move(answer));
  After(0, [due, key]() {
    auto it = due->find(key);
    if (it == due->end()) return;
    std::function<void()> answer = std::move(it->second);
    due->erase(it);
    answer();
  });
}

void Node::Impl::EnsureWriteTick() {
  if (write_tick_scheduled_ || requests_.running(RequestKind::kWrite) == 0)
    return;
  write_tick_scheduled_ = true;
  After(write_tick_micros_, [this]() { WriteTick(); });
}

void Node::Impl::WriteTick() {
  write_tick_scheduled_ = false;
  const uint64_t now = scheduler_->NowMicros();
  for (uint64_t id : requests_.Ids(RequestKind::kWrite)) {
    // A write may finish (or start others) during another's tick.
    if (WriteCoordinator* write = requests_.Find<WriteCoordinator>(id))
      Carry<WriteCoordinator>(id, write->Tick(now));
  }
  EnsureWriteTick();
}

// The machines whose outputs node.cc's routes carry out.
template void Node::Impl::Carry<WriteCoordinator>(uint64_t, RequestOutput,
                                                  bool);
template void Node::Impl::Carry<QueryCoordinator>(uint64_t, RequestOutput,
                                                  bool);
template void Node::Impl::Carry<CountCoordinator>(uint64_t, RequestOutput,
                                                  bool);

}  // namespace bigset
