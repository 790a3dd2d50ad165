// ReplicaService: the replica side of the cluster's protocols on one node.
// Internal header.
//
// It answers what coordinators (on this node or others) ask of this node's
// replicas: coordinate an update (kUpdate, with a reply cache so that a
// retransmitted request is answered again, never applied twice), apply a
// replicated delta or a repair (kReplicate, kRepair), fold a set for a read
// (kRead, then one chunk per kChunkAck; kStopFold ends it, kKeepFold keeps
// it from expiring) and answer membership queries (kQuery).
//
// It calls no other protocol and does no I/O: each handler returns a
// ServiceOutput, what the node's other protocols must do (a hand-off
// forwards a delta this node applied; a delta for a partition handed over
// is passed on; an asker that is behind is told this node's state), then
// the replies to send and the timers to set. The node carries it out in
// that order. Which replica answers is the partition's role on this node
// (PartitionRoles, which the hand-off sets), read, never changed.
//
// Resource bounds: a fold holds one chunk (at most max_chunk_elements and
// max_chunk_bytes, whatever the coordinator asked) and one snapshot; folds
// nobody keeps alive expire; the reply cache is bounded in bytes.
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_REPLICA_SERVICE_H_
#define BIGSET_LIB_CLUSTER_REPLICA_SERVICE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "bigset/cluster/node.h"
#include "cluster/node_counters.h"
#include "cluster/partition_roles.h"
#include "net/message.h"

namespace bigset {

// What a handler of ReplicaService leaves the node to do, in this order.
struct ServiceOutput {
  ServiceOutput() = default;
  explicit ServiceOutput(uint32_t p) : partition(p) {}

  // The partition the handled message names.
  uint32_t partition = 0;
  // This node's replica of `partition` applied this delta (coordinated,
  // replicated or repaired): hand-offs of the partition forward it. Points
  // into the service or the message: valid until the handler's next call.
  const Delta* applied = nullptr;
  // A delta (kReplicate, kReplicateGivenUp, kHandoffDelta or kRepair) came
  // for a partition this node has no replica of. The node offers it to the
  // hand-off, which passes it on if this node handed the partition over
  // (HandoffManager::ProxyDelta, with `own`); if it does not, the node
  // calls RefuseDelta for the refusal. Nothing else is set. Valid as
  // `applied`.
  const Delta* unplaced = nullptr;
  // With `unplaced`: for a kReplicateGivenUp of a write this node
  // coordinated before it handed the partition over, the delta it made.
  std::optional<Delta> own;
  // The sender asked about a partition this node holds no replica of: tell
  // it this node's ring epoch (it may be behind).
  bool tell_moved = false;
  // The replies, to send after the above (a hand-off's forward of a delta
  // goes before the delta's acknowledgement).
  absl::InlinedVector<std::pair<NodeId, std::string>, 1> sends;
  // Acknowledgements wait for a synced write: the node calls FlushAcks
  // from the scheduler, after this turn (every delta of the turn shares
  // one sync).
  bool flush_acks = false;
  // A fold to watch: the node calls FoldIdle(*watch_fold, now) after
  // `watch_micros`.
  std::optional<std::pair<NodeId, uint64_t>> watch_fold;
  uint64_t watch_micros = 0;
};

class ReplicaService {
 public:
  // A fold is keyed by (coordinator node, fold request id).
  using FoldKey = std::pair<NodeId, uint64_t>;

  // The replica side of node `self`, whose replicas `roles` holds and
  // assigns (not owned; read only), counting into `stats` (not owned).
  ReplicaService(NodeId self, const PartitionRoles* roles, NodeCounters* stats,
                 const ReplicaServiceOptions& options);
  ~ReplicaService();
  ReplicaService(const ReplicaService&) = delete;
  ReplicaService& operator=(const ReplicaService&) = delete;

  // kReplicate, kReplicateGivenUp, kHandoffDelta and kRepair, decoded into
  // a reused Delta (the bulk of the write traffic). `body` follows the
  // header.
  ServiceOutput HandleDelta(NodeId from, const MessageHeader& header,
                            std::string_view body);
  // The answer to a delta HandleDelta found no replica for (`unplaced`)
  // and the hand-off did not pass on: NotAReplica (none for a repair), and
  // the sender is told this node's state.
  ServiceOutput RefuseDelta(NodeId from, const MessageHeader& header);
  // The other requests, decoded. Update and Clear: coordinates the write
  // on the local replica.
  ServiceOutput HandleUpdate(NodeId from, const MessageHeader& header,
                             msg::Update& m);
  ServiceOutput HandleClear(NodeId from, const MessageHeader& header,
                            msg::Clear& m);
  // Fold requests; `now` is the node's time.
  ServiceOutput HandleRead(NodeId from, const MessageHeader& header,
                           msg::Read& m, uint64_t now);
  ServiceOutput HandleChunkAck(NodeId from, const MessageHeader& header,
                               const msg::ChunkAck& m, uint64_t now);
  void HandleStopFold(NodeId from, const MessageHeader& header);
  void HandleKeepFold(NodeId from, const MessageHeader& header, uint64_t now);
  // A fold's watch (`watch_fold`) fired: drops the fold if nobody kept it
  // alive for fold_idle_timeout_micros, else watches it again.
  ServiceOutput FoldIdle(const FoldKey& key, uint64_t now);
  ServiceOutput HandleQuery(NodeId from, const MessageHeader& header,
                            msg::Query& m);
  // Count: the set's count and digest (Replica::CountSummary).
  ServiceOutput HandleCount(NodeId from, const MessageHeader& header,
                            msg::Count& m);
  // The acknowledgements that waited for a synced write (`flush_acks`):
  // one sync, then all of them.
  ServiceOutput FlushAcks();

  // Drops every fold (their snapshots) now.
  void Clear();

  size_t folds_open() const { return folds_.size(); }
  size_t reply_cache_bytes() const { return reply_bytes_; }

 private:
  // Why this node answers no read, query or count of `partition`:
  // Unavailable while it hands the partition over (its place cannot be read
  // without it), NotFound when it does not serve it (the coordinator takes
  // the node that took its place alone: see place_quorum.h, kGone).
  absl::Status NoReadableReplica(uint32_t partition) const;

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
  struct CachedReply {
    FoldKey key;
    std::string bytes;
  };

  // Adds to `out` the reply `body` to `to`, answering `request`.
  template <typename Body>
  static void Reply(ServiceOutput& out, NodeId to, const MessageHeader& request,
                    const Body& body);
  // A query or count: `fill` answers it from the readable replica, or the
  // reply says why there is none.
  template <typename ReplyBody, typename Fill>
  ServiceOutput AnswerFromReadable(NodeId from, const MessageHeader& header,
                                   Fill fill);
  // An Update or Clear: runs `write` on the serving replica unless the
  // request was answered (its cached reply is sent again) or fenced, and
  // answers with an UpdateReply.
  ServiceOutput CoordinateWrite(
      NodeId from, const MessageHeader& header, std::string_view set,
      absl::FunctionRef<absl::StatusOr<Delta>(Replica*)> write);
  // Produces and sends the next chunk of a fold.
  void SendNextChunk(const FoldKey& key, Fold& fold, uint64_t seq,
                     ServiceOutput& out);
  void SendChunk(const FoldKey& key, const Fold& fold, ServiceOutput& out);
  // Asks the node to call FoldIdle for `key` after the idle timeout.
  void WatchFold(const FoldKey& key, ServiceOutput& out) const;
  void CacheReply(const FoldKey& key, const std::string& bytes);
  // Remembers that write `key` was coordinated elsewhere (bounded, oldest
  // forgotten first).
  // A kReplicateGivenUp from `from`: fences the request, and if this node
  // coordinated it after all, returns the delta it made (the write's to
  // replicate; the caller answers with it once the chosen delta is applied,
  // here or by the node that took this one's place).
  std::optional<Delta> GivenUpOwnDelta(NodeId from,
                                       const MessageHeader& header);
  void Fence(const FoldKey& key);
  // Group commit (sync_writes): the acknowledgement of a delta applied
  // unsynced waits here for one synced write that covers every delta
  // applied in the same turn; FlushAcks makes it and sends them all.
  void AckWhenDurable(NodeId to, const MessageHeader& ack, Replica* replica,
                      ServiceOutput& out);

  const NodeId self_;
  const PartitionRoles* const roles_;
  NodeCounters* const stats_;
  const ReplicaServiceOptions options_;
  std::map<FoldKey, Fold> folds_;
  // Replies to recent updates, oldest first; reply_seq_ numbers them so that
  // the index finds one in the deque.
  std::deque<CachedReply> replies_;
  absl::flat_hash_map<FoldKey, uint64_t> reply_index_;  // -> sequence
  uint64_t first_reply_seq_ = 0;
  size_t reply_bytes_ = 0;
  // Writes this replica must not coordinate: a kReplicateGivenUp came
  // before their kUpdate or kClear. Insertion order, for the bound.
  absl::flat_hash_set<FoldKey> fenced_;
  std::deque<FoldKey> fence_order_;
  Delta scratch_delta_;  // Reused by every replicated delta.
  Delta written_;        // The last write coordinated here (`applied`).
  struct PendingAck {
    NodeId to = 0;
    MessageHeader header;
  };
  std::vector<PendingAck> pending_acks_;
  // A replica of this node's store (they share it): its Sync covers them.
  Replica* sync_replica_ = nullptr;
  uint32_t sync_partition_ = 0;
  bool flush_scheduled_ = false;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_REPLICA_SERVICE_H_
