// ReadCoordinator: the state machine of one streaming read, range query or
// count over R replicas (docs/DESIGN.md, "Merge of R replicas").
// Internal header.
//
// It asks every replica of the set's preference list to fold the set (this
// node's own replica, if it has one, is read in-process); the first R
// clocks win and the other folds are stopped at once. The R streams are
// merged in element order by a ReadMerger; a replica is asked for its next
// chunk only when its buffer is empty, so at most one chunk per replica is
// buffered, also before R clocks have arrived and when a chunk overtakes
// its clock. Every difference found is sent as a repair. A replica that
// goes silent mid-stream is replaced by another replica of the list, which
// folds from after the last element merged (a bounded re-read), so a read
// with R < N survives the loss of a replica at any point. The coordinator
// keeps the folds it waits on alive while the client or other replicas are
// slow.
//
// Each fold has its own request id (routed to this coordinator by the
// node), so replies of a stopped fold never reach its replacement.
//
// The machine does no I/O of its own (request_output.h): Start, Step (a
// replica's clock or chunk), FoldOpened, LocalClock, ClientNext and Tick
// return what the driver is to do. Its effects: `folds_to_open` (the
// driver takes a request id for each, opens a reader of this node's own
// replica when the fold is this node's and it has a readable one, routes
// the id otherwise, and gives both to FoldOpened); `local_clocks` (the
// driver calls LocalClock from the scheduler, so that this node's clock
// arrives like the others, never inside the call that opened it);
// `clock_ready` and `chunk_ready` (the driver hands merged_clock() and
// chunk() to the sink; when OnChunk returns true, or later when the client
// calls its `next`, it calls ClientNext). A local fold reads through the
// SetReader the driver handed in. `done`: TakeAnswer gives the sink its
// OnDone.
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_READ_COORDINATOR_H_
#define BIGSET_LIB_CLUSTER_READ_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bigset/cluster/node.h"
#include "cluster/coordinator.h"
#include "cluster/read_merger.h"
#include "cluster/read_sink.h"
#include "cluster/request_output.h"
#include "net/message.h"

namespace bigset {

class ReadCoordinator : public CoordinatorOf<RequestKind::kRead> {
 public:
  // Where the read stands:
  //
  //   kGathering --(R places' clocks)--> kMerging <--ClientNext-- kClientHolds
  //                                      kMerging --(a chunk merged)--^
  //
  // and any phase -> kFinished (the merge ran out or reached the limit, a
  // replica's error, no progress within the timeout, an abort).
  enum class Phase {
    kGathering,    // Folds asked for; fewer than R places' clocks in.
    kMerging,      // The R streams merged as their chunks come.
    kClientHolds,  // The client has a chunk; the merge waits for its next.
    kFinished,     // The answer is decided (`done`).
  };
  Phase phase() const { return phase_; }

  // Where a read runs: its set's partition, the nodes serving it and their
  // places (HandoffManager::ServingList, ServingPlaces). The lists are
  // copied. (Which fold is this node's own, the driver decides.)
  struct Where {
    uint32_t partition = 0;
    const std::vector<NodeId>& serving;
    const std::vector<uint32_t>& places;
  };

  // The client's answer at the end: OnDone on its sink (once).
  struct Answer {
    std::shared_ptr<ReadSink> sink;
    absl::Status status;
    void operator()() {
      if (sink != nullptr) sink->OnDone(std::move(status));
    }
  };

  // `limit` caps the elements delivered (0: none).
  ReadCoordinator(uint64_t id, std::string set, Where where,
                  const ClusterReadOptions& options, ElementBounds bounds,
                  size_t limit, std::unique_ptr<ReadSink> sink);
  ~ReadCoordinator() override;

  RequestOutput Start(uint64_t now);
  // The fold `folds_to_open` asked for on slot `slot` has request id
  // `fold_id`; `local` reads this node's own replica for it (null: the
  // fold is asked for by message, under `fold_id`, which the driver
  // routed to this read).
  RequestOutput FoldOpened(uint32_t slot, uint64_t fold_id,
                           std::unique_ptr<SetReader> local, uint64_t now);
  // The clock of the local fold `fold_id` arrives (see `local_clocks`).
  RequestOutput LocalClock(uint64_t fold_id, uint64_t now);
  // A kReadClock for the fold `fold_id`.
  RequestOutput Step(NodeId from, uint64_t fold_id, msg::ReadClock& m,
                     uint64_t now);
  // A kReadChunk for the fold `fold_id` (header already parsed; the
  // chunk's elements still encoded).
  RequestOutput Step(NodeId from, uint64_t fold_id, uint64_t seq, bool done,
                     std::string_view elements, uint64_t now);
  // The client is done with chunk(): the read goes on.
  RequestOutput ClientNext(uint64_t now);
  RequestOutput Tick(uint64_t now);

  Answer TakeAnswer();
  void Abort(const absl::Status& status) override;

  // What the driver hands the sink: the read's context (once
  // `clock_ready`), the chunk the client gets (once `chunk_ready`; the
  // client may consume it until it asks for the next).
  ReadSink* sink() const { return sink_.get(); }
  Clock merged_clock() const { return merger_->MergedClock(); }
  std::vector<ElementDots>* chunk() { return &out_; }
  // Expires with this machine (for a `next` the client may call late).
  std::weak_ptr<bool> token() const { return alive_; }

  // What a local fold reads.
  const std::string& set() const { return set_; }
  uint32_t partition() const { return partition_; }
  uint32_t batch_size() const { return options_.batch_size; }

 private:
  enum class SlotState {
    kIdle,      // No fold open.
    kOpening,   // A fold asked of the driver (folds_to_open).
    kAsked,     // Fold asked for; clock not yet here.
    kNotFound,  // Clock here and empty, with notfound_ok off.
    kAccepted,  // Clock counted towards R (merging once R are in).
    kStopped,   // Fold not needed, or abandoned.
    kFailed,    // The replica answered with an error.
  };
  struct Slot {
    NodeId node = 0;
    // Its place (HandoffManager::ServingPlaces): a place counts towards R
    // once every slot of it has its clock (but those `gone`), and all of
    // them are merged.
    uint32_t place = 0;
    // kFailed because the node does not serve the partition (any more):
    // the rest of its place stands for it (QuorumReply::kGone).
    bool gone = false;
    SlotState state = SlotState::kIdle;
    uint64_t fold_id = 0;
    bool routed = false;  // fold_id is routed to this read.
    // The bounds of the fold being opened (kOpening).
    ElementBounds bounds;
    Clock clock;
    // Index in the merger, once merging (-1 before).
    int merger_index = -1;
    // This slot replaces merger index `replaces` (its clock plugs in when
    // it comes).
    int replaces = -1;
    uint64_t next_seq = 0;  // The chunk we wait for.
    // Whether next_seq was asked for (chunk 0 comes with the clock).
    bool requested = true;
    uint64_t last_heard = 0;  // Last message from this fold.
    uint64_t last_sent = 0;   // Last message to this fold.
    // This node's own replica is read in-process, not through messages.
    std::unique_ptr<SetReader> local;
    // The next chunk, when it arrived before the merge could take it
    // (before R clocks, or before this slot's own clock).
    bool has_early = false;
    bool early_done = false;
    std::vector<ElementDots> early;
  };

  bool InMerge(const Slot& s) const {
    return s.merger_index >= 0 && s.state == SlotState::kAccepted;
  }
  Slot* SlotOfFold(uint64_t fold_id);
  // Asks the driver for a fold on slot `i`, starting at `bounds` (the
  // read's, or after the last merged element when it replaces a replica).
  void OpenFold(size_t i, const ElementBounds& bounds);
  void AcceptClock(Slot& slot, Clock clock);
  // Fills a local slot's merge buffer with its next chunk.
  absl::Status FillLocal(Slot& slot);
  // Sends a message of the slot's fold (Read, ChunkAck, StopFold,
  // KeepFold) to its replica.
  template <typename Body>
  void SendToFold(Slot& slot, const Body& body);
  void StopFold(Slot& slot);
  void MaybeBegin();
  // Merges the slots `members` (R places' worth) and stops the others.
  void Begin(const std::vector<size_t>& members);
  // Whether slot `i` is alone in its place (a replacement must be).
  bool AloneInPlace(size_t i) const;
  // Hands a slot's early chunk to the merger, if it has one.
  void FeedEarly(Slot& slot);
  void Fed(Slot& slot);
  void Pump();
  void SendRepairs();
  // Drops slot `dropped` from the merge (or from replacing a merge slot)
  // and gives its merge slot to another replica, which folds from after the
  // last merged element. `failed`: the replica answered with an error, so
  // it is not tried again.
  void Replace(size_t dropped, bool failed = false);
  void Finish(absl::Status status);
  // The output built by the input being handled.
  RequestOutput Out();

  const std::string set_;
  const uint32_t partition_;
  const ClusterReadOptions options_;
  const ElementBounds bounds_;
  const size_t limit_;  // 0: none.
  std::unique_ptr<ReadSink> sink_;
  std::vector<Slot> slots_;
  std::unique_ptr<ReadMerger> merger_;
  std::vector<ElementDots> out_;  // The chunk the client holds.
  size_t emitted_ = 0;
  Phase phase_ = Phase::kGathering;
  uint64_t last_progress_ = 0;
  absl::Status result_;
  uint64_t now_ = 0;      // The time of the input being handled.
  RequestOutput output_;  // What the input being handled asks for.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_READ_COORDINATOR_H_
