// Node::Impl: the node's state and message dispatch. Internal header.
//
// The node holds its replicas (HostedReplicas, which the hand-off opens and
// retires), offers the client API, drives the request machines, the
// replica service, the hand-off and anti-entropy by carrying out their
// outputs (none of them does I/O), and routes every message
// (a table from message type to handler) to the protocol that owns it.
// The protocols live in their own files:
//
//   dispatcher.{h,cc}          message type -> handler
//   request_registry.{h,cc}    the client requests' coordinators, by id
//   replica_service.{h,cc}     the replica side of every protocol
//   hosted_replicas.h          the replicas this node keeps, by partition
//   request_ids.{h,cc}         request ids, leased in the store
//   write_coordinator.{h,cc}   client updates (N, W)
//   read_coordinator.{h,cc}    streaming reads, ranges, counts (R-way merge)
//   query_coordinator.{h,cc}   membership queries
//   count_coordinator.{h,cc}   counts the replicas agree on
//   read_merger.{h,cc}         the R-way streaming ORSWOT merge
//   read_sink.{h,cc}           where a read's merged elements go
//   handoff*.{h,cc}, membership.{h,cc}, partition_release.cc
//                              membership changes and hand-off
//   anti_entropy*.{h,cc}       anti-entropy rounds, hints and pushes
//
// Thread-safety: not thread-safe; see node.h.

#ifndef BIGSET_LIB_CLUSTER_NODE_IMPL_H_
#define BIGSET_LIB_CLUSTER_NODE_IMPL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "bigset/cluster/node.h"
#include "cluster/anti_entropy.h"
#include "cluster/count_coordinator.h"
#include "cluster/dispatcher.h"
#include "cluster/handoff.h"
#include "cluster/hosted_replicas.h"
#include "cluster/query_coordinator.h"
#include "cluster/read_coordinator.h"
#include "cluster/replica_service.h"
#include "cluster/request_ids.h"
#include "cluster/request_registry.h"
#include "cluster/slow_replicas.h"
#include "cluster/write_coordinator.h"

namespace bigset {

inline absl::Status NodeClosedError() {
  return absl::FailedPreconditionError("the node is closed");
}

class Node::Impl final {
 public:
  Impl(NodeId id, Ring ring, Store* store, Transport* transport,
       Scheduler* scheduler, const NodeOptions& options);
  ~Impl();

  // Takes a lease of request ids and opens every hosted replica.
  absl::Status Open();
  // Answers the requests still running (Unavailable), drops the
  // coordinators and folds, stops the timers and closes the replicas
  // cleanly. Requests and messages that come later are refused.
  absl::Status Close();

  NodeId node_id() const { return id_; }
  const Ring& ring() const { return handoff_.ring(); }
  const std::vector<NodeId>& ServingList(uint32_t partition) const {
    return handoff_.ServingList(partition);
  }
  const std::vector<uint32_t>& ServingPlaces(uint32_t partition) const {
    return handoff_.ServingPlaces(partition);
  }

  void RunAntiEntropy() {
    if (!closed_) {
      CarryProtocol(&anti_entropy_,
                    anti_entropy_.RunRoundsNow(scheduler_->NowMicros()));
    }
  }
  absl::Status InstallRing(const Ring& ring);
  uint64_t NextRequestId();
  void Send(NodeId to, std::string bytes);
  // Send, except that a message to this node itself is handled before
  // SendFirst returns (its answer travels as any other, later): for a
  // query whose answer must show this node's replica as it is now, before
  // a write made right after it (each peer takes a node's messages in
  // order, so the query reaches every replica before the write does).
  void SendFirst(NodeId to, std::string bytes);
  // Runs `fn` after `delay_micros` on the node's thread, unless the node is
  // closed or gone by then; then settles (see Settle).
  void After(uint64_t delay_micros, std::function<void()> fn);
  Replica* LocalReplica(uint32_t partition) {
    return roles_.LocalReplica(partition);
  }
  Replica* ReadableReplica(uint32_t partition) {
    return roles_.ReadableReplica(partition);
  }
  bool Serves(uint32_t partition) const { return handoff_.Serves(partition); }
  std::vector<PartitionMove> Moving() const {
    return handoff_.Moving(scheduler_->NowMicros());
  }
  NodeId PassesOnTo(uint32_t partition) const {
    return handoff_.PassesOnTo(partition);
  }

  // Hands the message to its protocol's handler (see InstallRoutes);
  // counts undecodable ones.
  void Receive(NodeId from, std::string_view bytes);
  // The stats with the gauges filled in.
  NodeCounters Snapshot() const;

  // Client entry points.
  // An update (`clear` empty) or a clear (`ops` empty).
  // A clear with an empty context: writes nothing, answered (with the
  // empty delta) from the scheduler like every write.
  void ClearNothing(std::string_view set,
                    std::function<void(absl::StatusOr<Delta>)> done);
  // Why a client request with this quorum (`name`: "w" or "r") cannot
  // start: the node is closed, or the quorum is outside [1, n]; OK if it
  // can.
  absl::Status Refusal(int quorum, const char* name) const;
  // Whether a client request is refused (Refusal); if it is, `done` got
  // why.
  template <typename Done>
  bool Refused(int quorum, const char* name, Done& done) const {
    absl::Status why = Refusal(quorum, name);
    if (why.ok()) return false;
    done(std::move(why));
    return true;
  }
  void Update(std::string_view set, std::vector<UpdateOp> ops,
              std::optional<Clock> clear, const ClusterWriteOptions& options,
              std::function<void(absl::StatusOr<Delta>)> done);
  void StartRead(std::string_view set, const ClusterReadOptions& options,
                 ElementBounds bounds, size_t limit,
                 std::unique_ptr<ReadSink> sink);
  void Count(std::string_view set, const ClusterReadOptions& options,
             std::function<void(absl::StatusOr<uint64_t>)> done);
  void ContainsAll(std::string_view set, std::vector<std::string> elements,
                   const ClusterReadOptions& options,
                   std::function<void(absl::StatusOr<Membership>)> done);

 private:
  // Registers every message type's handler with dispatcher_: the hot
  // messages' raw handlers, then the others'.
  void InstallRoutes();
  void InstallHotRoutes();
  // The typed messages, by protocol: the replica side and the replies to
  // coordinators; hand-off and membership; anti-entropy.
  void InstallReplicaRoutes();
  void InstallMembershipRoutes();
  void InstallAntiEntropyRoutes();
  // Carries out `out`, an output of the state machine of request `id` (of
  // kind T; request_output.h): its sends, counters, hints and unroutes,
  // then its answer (the machine is dropped first if it is done) or what
  // goes back into it and its next tick. With `in_client_call` (the input
  // came from the client's own call), the answer comes from the
  // scheduler (AnswerLater).
  template <typename T>
  void Carry(uint64_t id, RequestOutput out, bool in_client_call = false);
  // What every machine's output asks first: the sends, the counters, the
  // hints and the unroutes.
  void CarrySends(RequestOutput& out);
  // Carry for a read: its folds to open, its local clocks, and the client's
  // clock and chunks (a client that takes a chunk at once gets the next in
  // the same loop, never by recursion).
  void CarryRead(uint64_t id, RequestOutput out);
  // The `next` a read's client calls to go on (from the scheduler; nothing
  // once the read is gone).
  std::function<void()> ReadNext(uint64_t id, std::weak_ptr<bool> token);
  // Feeds the read `id` the input `step(read, now)` after `delay_micros`,
  // from the scheduler, and carries out its output; nothing if the read
  // has ended by then.
  void ReadLater(uint64_t id, uint64_t delay_micros,
                 std::function<RequestOutput(ReadCoordinator&, uint64_t)> step);
  // A write's effects that feed the machine again: its extra deltas' ids
  // and this node's replica coordinating it.
  void CarryWriteEffects(WriteCoordinator* op, const RequestOutput& out,
                         bool in_client_call);
  // Runs `answer` from the scheduler (or from Close, if it comes first),
  // filed in `due` under `key`.
  void AnswerLater(std::map<uint64_t, std::function<void()>>* due, uint64_t key,
                   std::function<void()> answer);
  // Carries out what a handler of the replica service asks (`from` sent
  // the message it handled, with `header`): the hand-off's part first
  // (passing on a delta for a partition handed over, or else the service's
  // refusal; forwarding an applied delta; telling a node that is behind),
  // then the replies, then the group commit's flush from the scheduler.
  void CarryService(NodeId from, const MessageHeader& header,
                    ServiceOutput out);
  // Routes Body to the replica service's `handle` and carries out its
  // output.
  template <typename Body>
  void ServeWith(ServiceOutput (ReplicaService::*handle)(NodeId,
                                                         const MessageHeader&,
                                                         Body&)) {
    using Message = std::remove_const_t<Body>;
    dispatcher_.On<Message>(
        [this, handle](NodeId from, const MessageHeader& header, Message& m) {
          CarryService(from, header, (service_.*handle)(from, header, m));
        });
  }
  // Sends what a protocol that keeps its own timers (the hand-off,
  // anti-entropy) asked to and arms its timers, in order; a timer calls its
  // OnTimer, whose output is carried out in turn.
  template <typename Protocol>
  void CarryProtocol(Protocol* protocol, ProtocolOutput out) {
    for (ProtocolOutput::Effect& e : out.effects) {
      if (!e.is_timer) {
        Send(e.to, std::move(e.bytes));
        continue;
      }
      After(e.delay_micros, [this, protocol, timer = e.timer] {
        CarryProtocol(protocol,
                      protocol->OnTimer(timer, scheduler_->NowMicros()));
      });
    }
  }
  // Routes Body to the protocol's Step and carries out its output.
  template <typename Body, typename Protocol>
  void RouteTo(Protocol* protocol) {
    dispatcher_.On<Body>(
        [this, protocol](NodeId from, const MessageHeader& header, Body& m) {
          CarryProtocol(protocol, protocol->Step(from, header, m,
                                                 scheduler_->NowMicros()));
        });
  }
  // Routes Body's replies to T::Step of the running machine that the
  // header's request id names, and carries out what it returns.
  template <typename T, typename Body>
  void RouteToMachine(RequestOutput (T::*step)(NodeId, Body&)) {
    using Message = std::remove_const_t<Body>;
    dispatcher_.On<Message>(
        [this, step](NodeId from, const MessageHeader& header, Message& m) {
          if (T* op = requests_.Find<T>(header.request_id)) {
            Carry<T>(header.request_id, (op->*step)(from, m));
          }
        });
  }
  // Where a quorum read of `set` runs (quorum_read_coordinator.h).
  QuorumReadSetup QuorumReadAt(std::string_view set) const;
  // One timer per node drives every write's retries and deadline (cheaper
  // than a timer per write).
  void EnsureWriteTick();
  void WriteTick();
  // The sweeper's timer runs while a replica's sweep queue may hold
  // entries: of `partition`, or of any replica if kAllPartitions.
  static constexpr uint32_t kAllPartitions = UINT32_MAX;
  void EnsureSweepTick(uint32_t partition);
  void SweepTick();

  // Carries out what an input (a message, a timer, a ring installed) left
  // for the end: anti-entropy forgets the streams of replicas the hand-off
  // retired.
  void Settle();

  const NodeId id_;
  const Ring initial_ring_;
  Transport* const transport_;
  Scheduler* const scheduler_;
  const NodeOptions options_;
  // What every replica's presence filters draw on: the node's total.
  const std::shared_ptr<MemoryBudget> filter_budget_;
  // Expires when the node is destroyed; timers hold a weak reference.
  std::shared_ptr<Impl*> alive_;
  RequestIds request_ids_;

  // The peers hedged queries found slow lately: the next ask them last.
  SlowReplicas slow_replicas_;
  // The replicas this node keeps; the hand-off opens and retires them.
  HostedReplicas replicas_;
  // What this node is to each partition: set by the hand-off, read by the
  // service, anti-entropy and the coordinators' local steps.
  PartitionRoles roles_;
  ReplicaService service_;
  HandoffManager handoff_;
  AntiEntropy anti_entropy_;
  // The client requests this node coordinates.
  RequestRegistry requests_;
  // Set by Close: requests fail with FailedPrecondition, messages are
  // dropped.
  bool closed_ = false;
  absl::Status close_status_;  // What the first Close returned,
  bool close_done_ = false;    // once it has.
  // Answers waiting for the scheduler (AnswerLater): the clears of nothing
  // (an empty context) by issue order, and the writes answered within the
  // client's call by request id. Close gives those still waiting: the
  // clears first, then each write among the aborts of the requests still
  // running, in the order the node issued them (node.h).
  uint64_t next_empty_clear_ = 0;
  std::map<uint64_t, std::function<void()>> due_clears_;
  std::map<uint64_t, std::function<void()>> due_writes_;
  bool write_tick_scheduled_ = false;
  uint64_t write_tick_micros_ = 0;
  bool sweep_tick_scheduled_ = false;
  size_t next_sweep_partition_ = 0;  // Round-robin over replicas_.
  NodeCounters stats_;
  // Message type -> the protocol's handler (InstallRoutes).
  Dispatcher dispatcher_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_NODE_IMPL_H_
