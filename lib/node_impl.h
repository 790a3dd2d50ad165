// Node::Impl and the coordinator state machines it runs. Internal header.
//
// Layout of the implementation:
//   node.cc      message dispatch, hosted replicas, the replica side of
//                every protocol (updates, replication, folds, queries,
//                repairs);
//   write_op.cc  the write coordinator (N, W);
//   read_op.cc   the read coordinator (R-way streaming merge, range,
//                count) and the membership query coordinator.

#ifndef BIGSET_LIB_NODE_IMPL_H_
#define BIGSET_LIB_NODE_IMPL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "bigset/node.h"
#include "read_merge.h"

namespace bigset {

// A message of `type` about `partition`, matched by `request_id`.
inline Message NewMessage(MessageType type, uint64_t request_id,
                          uint32_t partition) {
  Message m;
  m.type = type;
  m.request_id = request_id;
  m.partition = partition;
  return m;
}

// The write coordinator of one client update.
class WriteOp {
 public:
  // Idle until Reset. The node reuses finished coordinators (and the
  // capacity of their buffers) for later writes.
  explicit WriteOp(Node::Impl* node);
  void Reset(uint64_t id, std::string_view set, std::vector<UpdateOp> ops,
             const ClusterWriteOptions& options,
             std::function<void(absl::StatusOr<Delta>)> done);
  // Drops what belongs to the finished write (the client's callback, its
  // ops), keeping buffer capacity.
  void Release();
  void Start();
  void OnUpdateReply(NodeId from, Message& m);
  // The coordinating replica's answer, from a message or in-process.
  void OnCoordinated(NodeId from, absl::StatusOr<Delta> result);
  void OnReplicateAck(NodeId from, const absl::Status& status);
  // Called by the node's write tick: retries and the deadline.
  void OnTick(uint64_t now);

 private:
  void SendUpdate();
  void CoordinateLocally();
  // What Start had to put off: the client's answer, or the write's end.
  void RunDeferred();
  int IndexOf(NodeId node) const;
  void MaybeFinish();
  // Answers the client and forgets this write.
  void Finish(absl::StatusOr<Delta> result);
  // Answers the client; the write goes on replicating.
  void Reply(absl::StatusOr<Delta> result);

  Node::Impl* const node_;
  uint64_t id_ = 0;
  std::string set_;
  uint32_t partition_ = 0;
  const std::vector<NodeId>* preference_ = nullptr;  // The ring's.
  // Preference indices, in trying order.
  absl::InlinedVector<size_t, 4> candidates_;
  size_t attempt_ = 0;
  ClusterWriteOptions options_;
  std::function<void(absl::StatusOr<Delta>)> done_;
  std::vector<UpdateOp> ops_;
  std::string update_bytes_;  // Encoded when first sent to another node.
  std::string replicate_bytes_;
  bool coordinated_ = false;  // delta_ and replicate_bytes_ are set.
  Delta delta_;               // Until handed to the client.
  uint32_t acked_ = 0;        // Bit i: preference_[i] acknowledged.
  uint64_t deadline_ = 0;
  uint64_t next_retry_ = 0;
  bool starting_ = false;  // Inside Start: answers are deferred.
  bool deferred_ = false;  // RunDeferred is due.
  std::optional<absl::Status> deferred_error_;
};

// Where a read coordinator sends merged elements.
class ReadSink {
 public:
  virtual ~ReadSink() = default;
  virtual void OnClock(const Clock& clock) = 0;
  // Returns true to continue at once; false to wait for `next`.
  // `*elements` may be consumed until `next` is called (or, if this
  // returns true, until it returns).
  virtual bool OnChunk(std::vector<ElementDots>* elements,
                       std::function<void()> next) = 0;
  virtual void OnDone(absl::Status status) = 0;
};

// The read coordinator of one streaming read, range query or count.
class ReadOp {
 public:
  ReadOp(Node::Impl* node, uint64_t id, std::string set,
         const ClusterReadOptions& options, std::optional<std::string> start,
         bool start_inclusive, std::optional<std::string> end,
         bool end_inclusive, size_t limit, std::unique_ptr<ReadSink> sink);
  void Start();
  void OnClock(NodeId from, Message& m);
  // A chunk: its header, and its elements still encoded (decoded straight
  // into the merge buffer when possible).
  void OnChunk(NodeId from, const MessageHeader& header,
               std::string_view elements);
  void OnTimer();

 private:
  enum class SlotState { kAsked, kNotFound, kAccepted, kStopped, kFailed };
  struct Slot {
    NodeId node = 0;
    SlotState state = SlotState::kAsked;
    Clock clock;
    size_t merger_index = 0;
    uint64_t next_seq = 0;  // The chunk we wait for.
    // Whether next_seq was asked for (chunk 0 comes with the clock).
    bool requested = true;
    // This node's own replica is read in-process, not through messages.
    std::unique_ptr<SetReader> local;
    std::optional<Message> early_chunk;  // Arrived before R clocks.
  };

  Slot* SlotOf(NodeId node);
  // Opens this node's own replica for slot `i`; false if it has none.
  bool OpenLocal(size_t i);
  void OnLocalClock(size_t i);
  // Fills a local slot's merge buffer with its next chunk.
  absl::Status FillLocal(Slot& slot);
  void SendRead(const Slot& slot);
  // kChunkAck (for slot.next_seq) or kStopFold.
  void SendControl(const Slot& slot, MessageType type);
  void ScheduleTimer();
  void MaybeBegin();
  void Begin();
  void Feed(Slot& slot, Message& chunk);
  void Fed(Slot& slot);
  void Pump();
  void SendRepairs();
  void Finish(absl::Status status);

  Node::Impl* node_;
  const uint64_t id_;
  const std::string set_;
  const uint32_t partition_;
  const ClusterReadOptions options_;
  const std::optional<std::string> start_;
  const bool start_inclusive_;
  const std::optional<std::string> end_;
  const bool end_inclusive_;
  const size_t limit_;  // 0: none.
  std::unique_ptr<ReadSink> sink_;
  std::vector<Slot> slots_;
  std::vector<size_t> accepted_;  // Slot indices, in merger order.
  std::unique_ptr<ReadMerger> merger_;
  std::vector<ElementDots> out_;  // The chunk the client holds.
  size_t emitted_ = 0;
  bool waiting_for_client_ = false;
  uint64_t last_progress_ = 0;
};

// The coordinator of one membership (subset) query.
class QueryOp {
 public:
  QueryOp(Node::Impl* node, uint64_t id, std::string set,
          std::vector<std::string> elements, const ClusterReadOptions& options,
          std::function<void(absl::StatusOr<Membership>)> done);
  void Start();
  void OnReply(NodeId from, Message& m);
  void OnTimer();

 private:
  void ScheduleTimer();
  Message QueryMessage() const;
  void Finish(absl::StatusOr<Membership> result);

  Node::Impl* node_;
  const uint64_t id_;
  const std::string set_;
  const uint32_t partition_;
  std::vector<std::string> elements_;
  const ClusterReadOptions options_;
  std::function<void(absl::StatusOr<Membership>)> done_;
  std::vector<NodeId> preference_;
  std::map<NodeId, Message> replies_;
  std::set<NodeId> failed_;
  uint64_t deadline_ = 0;
};

class Node::Impl {
 public:
  Impl(NodeId id, Ring ring, Store* store, Transport* transport,
       Scheduler* scheduler, const NodeOptions& options);
  ~Impl();

  NodeId id() const { return id_; }
  const Ring& ring() const { return ring_; }
  Scheduler* scheduler() { return scheduler_; }
  Stats& stats() { return stats_; }
  uint64_t NextRequestId() { return next_request_id_++; }

  void Send(NodeId to, const Message& m);
  void SendBytes(NodeId to, std::string bytes);
  // Runs fn after `delay` unless this node is gone by then.
  template <typename F>
  void After(uint64_t delay_micros, F fn) {
    std::weak_ptr<Impl*> alive = alive_;
    scheduler_->After(delay_micros,
                      [alive = std::move(alive), fn = std::move(fn)]() mutable {
                        if (alive.lock()) fn();
                      });
  }

  void Receive(NodeId from, std::string_view bytes);
  Replica* LocalReplica(uint32_t partition);

  // Client entry points.
  void Update(std::string_view set, std::vector<UpdateOp> ops,
              const ClusterWriteOptions& options,
              std::function<void(absl::StatusOr<Delta>)> done);
  void StartRead(std::string_view set, const ClusterReadOptions& options,
                 std::optional<std::string> start, bool start_inclusive,
                 std::optional<std::string> end, bool end_inclusive,
                 size_t limit, std::unique_ptr<ReadSink> sink);
  void ContainsAll(std::string_view set, std::vector<std::string> elements,
                   const ClusterReadOptions& options,
                   std::function<void(absl::StatusOr<Membership>)> done);

  // Coordinators remove themselves when they finish.
  // Ends a write; its WriteOp may be reused at once (callers touch no
  // member after this).
  void EraseWrite(uint64_t id);
  void EraseRead(uint64_t id) { reads_.erase(id); }
  void EraseQuery(uint64_t id) { queries_.erase(id); }
  // Looks a coordinator up again after a callback that may have erased it.
  WriteOp* FindWrite(uint64_t id);
  ReadOp* FindRead(uint64_t id);
  QueryOp* FindQuery(uint64_t id);

 private:
  struct Fold {
    uint32_t partition = 0;
    std::unique_ptr<SetReader> reader;
    uint64_t last_sent = 0;
    bool done = false;
    // The last chunk sent (kept for retransmission); reused by every chunk.
    std::vector<ElementDots> buffer;
    std::string clock_message;
    uint64_t last_activity = 0;
  };
  using FoldKey = std::pair<NodeId, uint64_t>;

  void HandleUpdate(NodeId from, Message& m);
  void HandleRead(NodeId from, Message& m);
  void HandleChunkAck(NodeId from, const Message& m);
  void HandleQuery(NodeId from, Message& m);
  void HandleRepair(Message& m);
  // Produces and sends the next chunk of a fold.
  void SendNextChunk(const FoldKey& key, Fold& fold, uint64_t seq);
  void SendChunk(const FoldKey& key, const Fold& fold);
  void ScheduleFoldExpiry(const FoldKey& key);
  // One timer per node drives every write's retries and deadline (cheaper
  // than a timer per write).
  void EnsureWriteTick();
  void WriteTick();

  const NodeId id_;
  const Ring ring_;
  Store* const store_;
  Transport* const transport_;
  Scheduler* const scheduler_;
  const NodeOptions options_;
  // Expires when the node is destroyed; timers hold a weak reference.
  std::shared_ptr<Impl*> alive_;

  uint64_t next_request_id_;
  std::vector<std::unique_ptr<Replica>> replicas_;  // By partition.
  // Unordered for speed; a tick sorts the ids (deterministic order).
  absl::flat_hash_map<uint64_t, std::unique_ptr<WriteOp>> writes_;
  std::vector<std::unique_ptr<WriteOp>> spare_writes_;  // For reuse.
  bool write_tick_scheduled_ = false;
  uint64_t write_tick_micros_ = 0;
  std::map<uint64_t, std::unique_ptr<ReadOp>> reads_;
  std::map<uint64_t, std::unique_ptr<QueryOp>> queries_;
  std::map<FoldKey, Fold> folds_;
  // Replies to recent update requests, so that a retransmitted request is
  // answered again instead of applied twice. Bounded FIFO.
  struct CachedReply {
    FoldKey key;
    std::string bytes;
  };
  absl::flat_hash_map<FoldKey, size_t> update_replies_;  // -> ring index.
  std::vector<CachedReply> update_reply_ring_;  // Circular; reuses strings.
  size_t update_reply_next_ = 0;
  Delta scratch_delta_;  // Reused by every replicated delta.
  Stats stats_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_NODE_IMPL_H_
