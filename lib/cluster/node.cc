#include "bigset/cluster/node.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bigset/keys/keys.h"
#include "cluster/node_impl.h"
#include "cluster/read_sink.h"
#include "core/coding.h"
#include "core/status_macros.h"
#include "net/message.h"
#include "replica/continuation.h"

namespace bigset {
ReadHandler::~ReadHandler() = default;

Node::Impl::Impl(NodeId id, Ring ring, Store* store, Transport* transport,
                 Scheduler* scheduler, const NodeOptions& options)
    : id_(id),
      initial_ring_(std::move(ring)),
      transport_(transport),
      scheduler_(scheduler),
      options_(options),
      filter_budget_(options.replica.presence_filter_budget != nullptr
                         ? options.replica.presence_filter_budget
                         : std::make_shared<MemoryBudget>(
                               options.replica.presence_filter_bytes)),
      alive_(std::make_shared<Impl*>(this)),
      request_ids_(id, store, &options_.replica.actor_id_source),
      replicas_(id, store, &options_.replica, filter_budget_,
                initial_ring_.ring_size()),
      roles_(&replicas_),
      service_(id, &roles_, &stats_, options_.service),
      handoff_(id, store, &replicas_, &roles_, &stats_, &request_ids_,
               options_.handoff),
      anti_entropy_(id, &roles_, &stats_, &request_ids_,
                    options_.anti_entropy) {
  InstallRoutes();
}

Node::Impl::~Impl() {
  // Coordinators and folds go first (folds hold snapshots of the replicas'
  // store), then the replicas.
  alive_.reset();
  requests_.Clear();
  service_.Clear();
  replicas_.Clear();
}

absl::Status Node::Impl::Open() {
  absl::Status routes = dispatcher_.CheckComplete();
  if (!routes.ok()) return routes;
  BIGSET_RETURN_IF_ERROR(request_ids_.Open());
  // The lease's end differs at every open: the node's incarnation.
  BIGSET_RETURN_IF_ERROR(
      handoff_.Load(initial_ring_, request_ids_.lease_end()));
  auto [opened, out] = handoff_.Open(scheduler_->NowMicros());
  CarryProtocol(&handoff_, std::move(out));
  BIGSET_RETURN_IF_ERROR(opened);
  CarryProtocol(&anti_entropy_, anti_entropy_.Start(scheduler_->NowMicros()));
  // Queues left from before the restart.
  EnsureSweepTick(kAllPartitions);
  return absl::OkStatus();
}

absl::Status Node::Impl::InstallRing(const Ring& ring) {
  if (closed_) return NodeClosedError();
  auto [installed, out] = handoff_.InstallRing(ring, scheduler_->NowMicros());
  CarryProtocol(&handoff_, std::move(out));
  BIGSET_RETURN_IF_ERROR(installed);
  Settle();
  return absl::OkStatus();
}

absl::Status Node::Impl::Close() {
  if (closed_) {
    return close_done_ ? close_status_
                       : absl::FailedPreconditionError("the node is closing");
  }
  closed_ = true;
  // Timers set from now on, or earlier, run nothing: the answers that wait
  // for one (clears of nothing, writes answered within the client's call)
  // are given here.
  alive_.reset();
  std::map<uint64_t, std::function<void()>> clears = std::move(due_clears_);
  due_clears_.clear();
  for (auto& [n, answer] : clears) answer();
  // Every client hears of its request (a read's handler would otherwise
  // wait forever); no coordinator may write after the replicas are closed.
  // A write answered within its client's call gets that answer in its turn.
  std::map<uint64_t, std::function<void()>> writes = std::move(due_writes_);
  due_writes_.clear();
  requests_.AbortAll(
      absl::UnavailableError(
          "the node closed before the request finished (a write may or may "
          "not have been applied)"),
      [&writes](uint64_t next) {
        while (!writes.empty() && writes.begin()->first < next) {
          std::function<void()> answer = std::move(writes.begin()->second);
          writes.erase(writes.begin());
          answer();
        }
      });
  service_.Clear();
  const absl::Status first = replicas_.CloseAll();
  replicas_.FreeRetired();
  close_status_ = first;
  close_done_ = true;
  return first;
}

uint64_t Node::Impl::NextRequestId() { return request_ids_.Next(); }

NodeCounters Node::Impl::Snapshot() const {
  NodeCounters s = stats_;
  anti_entropy_.FillStats(&s);
  s.folds_open = service_.folds_open();
  s.fold_routes = requests_.routes(RequestKind::kRead);
  s.stale_routes = requests_.stale_routes();
  s.reply_cache_bytes = service_.reply_cache_bytes();
  handoff_.FillStats(&s);
  replicas_.FillStats(&s);
  return s;
}

void Node::Impl::Send(NodeId to, std::string bytes) {
  transport_->Send(id_, to, std::move(bytes));
}

void Node::Impl::SendFirst(NodeId to, std::string bytes) {
  if (to != id_) {
    Send(to, std::move(bytes));
    return;
  }
  Receive(id_, bytes);
}

void Node::Impl::After(uint64_t delay_micros, std::function<void()> fn) {
  std::weak_ptr<Impl*> alive = alive_;
  scheduler_->After(delay_micros,
                    [alive = std::move(alive), fn = std::move(fn)]() mutable {
                      if (!alive.lock()) return;
                      fn();
                      // Unless fn closed (or destroyed) the node.
                      if (std::shared_ptr<Impl*> impl = alive.lock()) {
                        (*impl)->Settle();
                      }
                    });
}

void Node::Impl::Settle() {
  // A replica retired during the input: anti-entropy forgets its streams
  // before any other input reaches it.
  for (uint32_t p : handoff_.TakeRetired()) anti_entropy_.PartitionRetired(p);
}

void Node::Impl::EnsureSweepTick(uint32_t partition) {
  if (sweep_tick_scheduled_ || options_.sweep.tick_micros == 0 ||
      options_.sweep.keys_per_second == 0) {
    return;
  }
  bool pending = false;
  if (partition == kAllPartitions) {
    for (uint32_t p = 0; p < replicas_.size(); ++p) {
      Replica* r = replicas_.Get(p);
      pending |= r != nullptr && r->sweep_pending();
    }
  } else {
    Replica* r = LocalReplica(partition);
    pending = r != nullptr && r->sweep_pending();
  }
  if (!pending) return;
  sweep_tick_scheduled_ = true;
  After(options_.sweep.tick_micros, [this]() { SweepTick(); });
}

void Node::Impl::SweepTick() {
  sweep_tick_scheduled_ = false;
  uint64_t budget = options_.sweep.KeysPerTick();
  const size_t n = replicas_.size();
  for (size_t i = 0; i < n && budget > 0; ++i) {
    const size_t p = (next_sweep_partition_ + i) % n;
    Replica* r = replicas_.Get(static_cast<uint32_t>(p));
    if (r == nullptr || !r->sweep_pending()) continue;
    absl::StatusOr<SweepProgress> done = r->SweepSome(budget);
    if (!done.ok()) {
      ++stats_.sweep_errors;
      continue;
    }
    budget -= std::min(budget, done->keys_read);
    // The next tick starts after the last replica swept, so that one
    // replica's big sweep does not hold up the others.
    next_sweep_partition_ = (p + 1) % n;
  }
  EnsureSweepTick(kAllPartitions);
}

void Node::Impl::CarryService(NodeId from, const MessageHeader& header,
                              ServiceOutput out) {
  if (out.unplaced != nullptr) {
    auto [proxied, effects] = handoff_.ProxyDelta(
        from, header, *out.unplaced, out.own.has_value() ? &*out.own : nullptr,
        scheduler_->NowMicros());
    CarryProtocol(&handoff_, std::move(effects));
    if (proxied) return;
    out = service_.RefuseDelta(from, header);
  }
  if (out.applied != nullptr) {
    CarryProtocol(&handoff_, handoff_.OnApplied(out.partition, *out.applied,
                                                scheduler_->NowMicros()));
  }
  if (out.tell_moved) {
    CarryProtocol(&handoff_, handoff_.TellMoved(from, out.partition,
                                                scheduler_->NowMicros()));
  }
  for (auto& [to, bytes] : out.sends) Send(to, std::move(bytes));
  if (out.flush_acks) {
    After(0, [this]() {
      CarryService(id_, MessageHeader{}, service_.FlushAcks());
    });
  }
  if (out.watch_fold.has_value()) {
    After(out.watch_micros, [this, key = *out.watch_fold]() {
      CarryService(id_, MessageHeader{},
                   service_.FoldIdle(key, scheduler_->NowMicros()));
    });
  }
}

void Node::Impl::Receive(NodeId from, std::string_view bytes) {
  if (closed_) return;
  ++stats_.messages_received;
  // A handler's client callback may destroy the node (not only close it).
  std::weak_ptr<Impl*> alive = alive_;
  if (!dispatcher_.Dispatch(from, bytes)) ++stats_.malformed_messages;
  if (alive.lock()) Settle();
}

void Node::Impl::InstallRoutes() {
  InstallHotRoutes();
  InstallReplicaRoutes();
  InstallMembershipRoutes();
  InstallAntiEntropyRoutes();
}

void Node::Impl::InstallHotRoutes() {
  using T = MessageType;
  Dispatcher& d = dispatcher_;
  // The bulk of the traffic, parsed without a message struct.
  auto delta = [this](NodeId from, const MessageHeader& header,
                      std::string_view body) {
    CarryService(from, header, service_.HandleDelta(from, header, body));
    EnsureSweepTick(header.partition);  // A clear may have arrived.
    return true;
  };
  d.OnRaw(T::kReplicate, delta);
  d.OnRaw(T::kReplicateGivenUp, delta);
  d.OnRaw(T::kRepair, delta);
  d.OnRaw(T::kHandoffDelta, delta);
  d.OnRaw(T::kHandoffDeltaAck, [this](NodeId from, const MessageHeader& header,
                                      std::string_view body) {
    absl::Status status;
    NodeId applied_by = 0;
    msg::PlaceTaken taken;
    if (!ParseStatusBody(body, &status, &applied_by, &taken).ok()) {
      return false;
    }
    CarryProtocol(&handoff_, handoff_.HandleDeltaAck(from, header.request_id,
                                                     status, applied_by, taken,
                                                     scheduler_->NowMicros()));
    return true;
  });
  d.OnRaw(T::kReplicateAck, [this](NodeId from, const MessageHeader& header,
                                   std::string_view body) {
    absl::Status status;
    NodeId applied_by = 0;
    msg::PlaceTaken taken;
    if (!ParseStatusBody(body, &status, &applied_by, &taken).ok()) {
      return false;
    }
    if (WriteCoordinator* write =
            requests_.FindOwnOrRouted<WriteCoordinator>(header.request_id)) {
      const uint64_t id = write->id();
      Carry<WriteCoordinator>(
          id, write->Acknowledged(header.request_id, from, applied_by,
                                  roles_.PlaceGivers(write->partition(), taken),
                                  status));
    } else {
      anti_entropy_.OnReplicateAck(header.request_id, from, status);
    }
    return true;
  });
  d.OnRaw(T::kReadChunk, [this](NodeId from, const MessageHeader& header,
                                std::string_view body) {
    uint64_t seq = 0;
    bool done = false;
    std::string_view elements;
    if (!ParseReadChunkBody(body, &seq, &done, &elements).ok()) return false;
    if (ReadCoordinator* read =
            requests_.FindByRoute<ReadCoordinator>(header.request_id)) {
      CarryRead(read->id(), read->Step(from, header.request_id, seq, done,
                                       elements, scheduler_->NowMicros()));
    }
    return true;
  });
}

void Node::Impl::InstallReplicaRoutes() {
  using H = const MessageHeader&;
  Dispatcher& d = dispatcher_;
  // The replica side (ReplicaService).
  d.On<msg::Update>([this](NodeId f, H h, msg::Update& m) {
    CarryService(f, h, service_.HandleUpdate(f, h, m));
    EnsureSweepTick(h.partition);
  });
  d.On<msg::Clear>([this](NodeId f, H h, msg::Clear& m) {
    CarryService(f, h, service_.HandleClear(f, h, m));
    EnsureSweepTick(h.partition);
  });
  d.On<msg::Read>([this](NodeId f, H h, msg::Read& m) {
    CarryService(f, h, service_.HandleRead(f, h, m, scheduler_->NowMicros()));
  });
  d.On<msg::ChunkAck>([this](NodeId f, H h, msg::ChunkAck& m) {
    CarryService(f, h,
                 service_.HandleChunkAck(f, h, m, scheduler_->NowMicros()));
  });
  d.On<msg::StopFold>(
      [this](NodeId f, H h, msg::StopFold&) { service_.HandleStopFold(f, h); });
  d.On<msg::KeepFold>([this](NodeId f, H h, msg::KeepFold&) {
    service_.HandleKeepFold(f, h, scheduler_->NowMicros());
  });
  ServeWith(&ReplicaService::HandleQuery);
  ServeWith(&ReplicaService::HandleCount);

  // Replies, to the coordinator of the request.
  RouteToMachine(&CountCoordinator::Step);
  RouteToMachine(&QueryCoordinator::Step);
  RouteToMachine<WriteCoordinator, msg::UpdateReply>(&WriteCoordinator::Step);
  RouteToMachine<WriteCoordinator, msg::ReplicateAckWithDelta>(
      &WriteCoordinator::Step);
  d.On<msg::ReadClock>([this](NodeId from, H h, msg::ReadClock& m) {
    if (ReadCoordinator* read =
            requests_.FindByRoute<ReadCoordinator>(h.request_id)) {
      CarryRead(read->id(),
                read->Step(from, h.request_id, m, scheduler_->NowMicros()));
    }
  });
}

void Node::Impl::InstallMembershipRoutes() {
  using H = const MessageHeader&;
  Dispatcher& d = dispatcher_;
  d.On<msg::TransferChunk>(
      [this](NodeId f, H h, msg::TransferChunk& m) {
        CarryProtocol(&handoff_,
                      handoff_.Step(f, h, m, scheduler_->NowMicros()));
        EnsureSweepTick(h.partition);  // A transfer may tombstone.
      },
      /*bulk=*/true);
  RouteTo<msg::TransferAck>(&handoff_);
  RouteTo<msg::HandoffDone>(&handoff_);
  RouteTo<msg::HandoffDoneAck>(&handoff_);
  d.On<msg::RingEpoch>([this](NodeId f, H, msg::RingEpoch& m) {
    handoff_.NoteEpoch(f, m.epoch);
  });
  RouteTo<msg::Membership>(&handoff_);
}

void Node::Impl::InstallAntiEntropyRoutes() {
  using H = const MessageHeader&;
  Dispatcher& d = dispatcher_;
  RouteTo<msg::AeDigest>(&anti_entropy_);
  RouteTo<msg::AeDigestReply>(&anti_entropy_);
  RouteTo<msg::AeSets>(&anti_entropy_);
  RouteTo<msg::AeSetsReply>(&anti_entropy_);
  RouteTo<msg::AePull>(&anti_entropy_);
  RouteTo<msg::AePushAck>(&anti_entropy_);
  d.On<msg::AePush>(
      [this](NodeId f, H h, msg::AePush& m) {
        CarryProtocol(&anti_entropy_,
                      anti_entropy_.Step(f, h, m, scheduler_->NowMicros()));
        EnsureSweepTick(h.partition);
      },
      /*bulk=*/true);
}

// ---- Node (the public face).

absl::StatusOr<std::unique_ptr<Node>> Node::Open(NodeId id, const Ring& ring,
                                                 Store* store,
                                                 Transport* transport,
                                                 Scheduler* scheduler,
                                                 const NodeOptions& options) {
  if (store == nullptr || transport == nullptr || scheduler == nullptr) {
    return absl::InvalidArgumentError("store, transport and scheduler needed");
  }
  if (options.replica.lock_stripes < 1 ||
      options.service.max_chunk_elements < 1 ||
      options.service.max_chunk_bytes < 1 ||
      options.handoff.chunk_elements < 1 || options.handoff.chunk_bytes < 1 ||
      options.handoff.max_running < 1 || options.handoff.window < 1 ||
      options.handoff.release_keys_per_tick < 1 ||
      options.anti_entropy.chunk_elements < 1 ||
      options.anti_entropy.chunk_bytes < 1) {
    return absl::InvalidArgumentError(
        "replica.lock_stripes, the chunk bounds (service.max_chunk_*, "
        "handoff.chunk_*, anti_entropy.chunk_*), handoff.max_running, "
        "handoff.window and handoff.release_keys_per_tick must be >= 1");
  }
  if (options.replica.read_only) {
    return absl::InvalidArgumentError("a node's replicas cannot be read-only");
  }
  auto impl =
      std::make_unique<Impl>(id, ring, store, transport, scheduler, options);
  BIGSET_RETURN_IF_ERROR(impl->Open());
  return std::unique_ptr<Node>(new Node(std::move(impl)));
}

Node::Node(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Node::~Node() = default;

NodeId Node::id() const { return impl_->node_id(); }

absl::Status Node::Close() { return impl_->Close(); }

void Node::Receive(NodeId from, std::string_view bytes) {
  impl_->Receive(from, bytes);
}

void Node::Update(std::string_view set, std::vector<UpdateOp> ops,
                  const ClusterWriteOptions& options,
                  std::function<void(absl::StatusOr<Delta>)> done) {
  impl_->Update(set, std::move(ops), std::nullopt, options, std::move(done));
}

void Node::Clear(std::string_view set, const Clock& context,
                 const ClusterWriteOptions& options,
                 std::function<void(absl::StatusOr<Delta>)> done) {
  if (context.empty()) {
    // Clears nothing, and writes nothing anywhere.
    impl_->ClearNothing(set, std::move(done));
    return;
  }
  impl_->Update(set, {}, context, options, std::move(done));
}

void Node::Read(std::string_view set, const ClusterReadOptions& options,
                ReadHandler* handler, const ElementBounds* bounds) {
  impl_->StartRead(set, options, bounds ? *bounds : ElementBounds(), 0,
                   NewHandlerSink(handler));
}

void Node::Range(std::string_view set, const RangeQuery& query,
                 const ClusterReadOptions& options,
                 std::function<void(absl::StatusOr<RangeResult>)> done) {
  ElementBounds bounds = query;
  if (!query.continuation.empty()) {
    absl::StatusOr<std::string> after = DecodeContinuation(query.continuation);
    if (!after.ok()) {
      done(after.status());
      return;
    }
    bounds.start = std::move(*after);
    bounds.start_inclusive = false;
  }
  impl_->StartRead(set, options, std::move(bounds), query.limit,
                   NewRangeSink(query.limit, std::move(done)));
}

void Node::Count(std::string_view set, const ClusterReadOptions& options,
                 std::function<void(absl::StatusOr<uint64_t>)> done) {
  impl_->Count(set, options, std::move(done));
}

void Node::ContainsAll(std::string_view set, std::vector<std::string> elements,
                       const ClusterReadOptions& options,
                       std::function<void(absl::StatusOr<Membership>)> done) {
  impl_->ContainsAll(set, std::move(elements), options, std::move(done));
}

Replica* Node::LocalReplica(uint32_t partition) {
  return impl_->LocalReplica(partition);
}

NodeStats Node::stats() const {
  return NodeStats::FromCounters(impl_->Snapshot());
}

void Node::RunAntiEntropy() { impl_->RunAntiEntropy(); }

absl::Status Node::InstallRing(const Ring& ring) {
  return impl_->InstallRing(ring);
}

const Ring& Node::ring() const { return impl_->ring(); }

std::vector<PartitionMove> Node::Moving() const { return impl_->Moving(); }

NodeId Node::PassesOnTo(uint32_t partition) const {
  return impl_->PassesOnTo(partition);
}

std::vector<NodeId> Node::ServingList(uint32_t partition) const {
  if (partition >= impl_->ring().ring_size()) return {};
  return impl_->ServingList(partition);
}

}  // namespace bigset
