// AntiEntropy: replicas of a partition that converge by themselves, at a
// cost that follows their difference (docs/ARCHITECTURE.md, "Anti-entropy").
// Internal header.
//
// Two mechanisms:
//
//  - Hints. A write that ends (all acknowledged, or its deadline) with
//    replicas that never acknowledged its delta leaves the delta's message
//    here, one hint per such replica; each timer tick resends due hints
//    until acknowledged. So a replica that missed a few updates (lost
//    messages, a crash, a partition) gets exactly those updates, removes
//    and clears included. Hints live in memory within
//    AntiEntropyOptions::hint_bytes; the oldest go first. A hint dropped
//    (for the bound, or never acknowledged) is not lost silently: its
//    partition and peer get two digest rounds at once (a difference needs
//    two sightings), without waiting for the next interval.
//
//  - Digest rounds. Every AntiEntropyOptions::interval_micros (jittered), for
//  each
//    partition it hosts and each other node serving it, the node compares
//    digests (replica.h, "Digests for anti-entropy"): the partition digest
//    (one message each way when equal, no element key read), then bucket
//    digests, then the set summaries of differing buckets (clocks read, no
//    element key; both messages bounded in bytes, whatever the partition
//    holds). For each set that differs: the dots one side has seen and the
//    other has not are pushed (kAePush: the keys of those dots from one
//    snapshot, then the dots, so the receiver learns which of them were
//    removed), in both directions; a set whose clocks are equal but whose
//    keys differ (a remove or a clear one side missed and no hint covered)
//    is exchanged whole, both ways. Either is done only once a second
//    sighting confirms the difference (a write still in flight is not
//    one): the same dots missing, or the same difference of keys digests
//    (ours minus theirs, which writes both replicas applied leave as it
//    is). Sightings are bounded (kMaxSuspects); a round looks first at the
//    buckets where the last one noted sightings, so that a difference of
//    any size is repaired, a bounded part per round.
//
// Pushes are rate limited (AntiEntropyOptions::bytes_per_second, hints
// included), chunked, one chunk in flight, retransmitted, and restarted from a
// new snapshot under a new id when the receiver lost their state.
//
// Thread-safety: runs on the node's thread.

#ifndef BIGSET_LIB_CLUSTER_ANTI_ENTROPY_H_
#define BIGSET_LIB_CLUSTER_ANTI_ENTROPY_H_

#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "bigset/cluster/node.h"
#include "bigset/core/clock.h"
#include "bigset/replica/set_reader.h"
#include "cluster/node_counters.h"
#include "cluster/partition_roles.h"
#include "cluster/protocol_output.h"
#include "cluster/request_ids.h"
#include "cluster/set_stream_receiver.h"
#include "net/message.h"

namespace bigset {

class AntiEntropy {
 public:
  // `self` is this node; `roles` (the partitions' roles on it: serving
  // lists, replicas), `stats` and `ids` are the node's, not owned, and
  // outlive this.
  AntiEntropy(NodeId self, const PartitionRoles* roles, NodeCounters* stats,
              RequestIds* ids, const AntiEntropyOptions& options);
  ~AntiEntropy();
  AntiEntropy(const AntiEntropy&) = delete;
  AntiEntropy& operator=(const AntiEntropy&) = delete;

  // Every input takes the time and returns what the driver must send and
  // the timers it must arm, in order (protocol_output.h); a timer comes
  // back as OnTimer. Anti-entropy does no I/O itself.

  // Starts the timer (none if anti-entropy is off).
  ProtocolOutput Start(uint64_t now) {
    return Run(now, [&] { StartTimer(); });
  }
  // The anti-entropy messages (net/anti_entropy_messages.h).
  template <typename Body>
  ProtocolOutput Step(NodeId from, const MessageHeader& header, Body& m,
                      uint64_t now) {
    return Run(now, [&] { OnMessage(from, header, m); });
  }
  // A timer the driver armed.
  ProtocolOutput OnTimer(uint32_t timer, uint64_t now);
  // A write ended with `peer` not having acknowledged its delta message
  // `bytes` (kReplicate, request id `request_id`).
  ProtocolOutput AddHint(NodeId peer, uint32_t partition, uint64_t request_id,
                         const std::string& bytes, uint64_t now) {
    return Run(now, [&] { QueueHint(peer, partition, request_id, bytes); });
  }
  // A kReplicateAck no write claimed: true if it answered a hint.
  bool OnReplicateAck(uint64_t request_id, NodeId from,
                      const absl::Status& status);
  // This node's replica of `partition` is retired: pushes received into it
  // are forgotten (their next chunks are answered Aborted; see
  // SetStreamReceiver::ForgetPartition).
  void PartitionRetired(uint32_t partition) {
    receiver_.ForgetPartition(partition);
  }
  // Gauges into *stats.
  void FillStats(NodeCounters* stats) const;
  // Runs one digest round per (partition, peer) now (tests, tools).
  ProtocolOutput RunRoundsNow(uint64_t now) {
    return Run(now, [&] { StartRounds(); });
  }

 private:
  static constexpr uint32_t kTick = 1;  // The one timer.

  // Runs one input: its effects go to out_, which is returned.
  template <typename F>
  ProtocolOutput Run(uint64_t now, F&& input) {
    return RunProtocolInput(&now_, &out_, now, input);
  }
  void StartTimer();
  void QueueHint(NodeId peer, uint32_t partition, uint64_t request_id,
                 const std::string& bytes);
  void StartRounds();
  void OnMessage(NodeId from, const MessageHeader& header,
                 const msg::AeDigest& m);
  void OnMessage(NodeId from, const MessageHeader& header,
                 const msg::AeDigestReply& m);
  void OnMessage(NodeId from, const MessageHeader& header,
                 const msg::AeSets& m);
  void OnMessage(NodeId from, const MessageHeader& header,
                 const msg::AeSetsReply& m);
  void OnMessage(NodeId from, const MessageHeader& header,
                 const msg::AePull& m);
  void OnMessage(NodeId from, const MessageHeader& header, msg::AePush& m);
  void OnMessage(NodeId from, const MessageHeader& header,
                 const msg::AePushAck& m);

  struct Round {
    uint32_t partition = 0;
    NodeId peer = 0;
    uint64_t started = 0;
    // The buckets the round compares set by set, those to revisit first.
    std::vector<uint32_t> buckets;
  };
  using SuspectKey = std::tuple<NodeId, uint32_t, std::string>;
  // What rounds found different in a set, per (peer, partition, set). A
  // difference is acted on when a second sighting confirms it.
  struct Suspect {
    // The last sighting with clocks that differ: the dots each side lacked.
    bool dots = false;
    Clock push;
    Clock pull;
    // The last sighting with equal clocks and keys that differ: our keys
    // digest minus theirs (mod 2^64), which adds and removes both replicas
    // applied leave as it is.
    bool keys = false;
    uint64_t keys_diff = 0;
    // A full exchange for keys_diff ran while a tombstone was not empty.
    bool exchanged = false;
    uint64_t wave = 0;  // Of the last sighting.
    // Acted on at its last sighting: its place may go to a new sighting.
    bool acted = false;
    std::list<SuspectKey>::iterator lru;  // In waiting_ or acted_.
  };
  struct Push;
  struct Hint {
    NodeId peer = 0;
    uint32_t partition = 0;
    uint64_t request_id = 0;
    std::string bytes;
    uint64_t next_send = 0;
    int sends = 0;
  };

  void Tick();
  // Forgets a hint; returns the next one.
  std::list<Hint>::iterator EraseHint(std::list<Hint>::iterator it);
  // A hint was dropped: its partition and peer are due digest rounds.
  void DropHint(std::list<Hint>::iterator it);
  // Starts the due rounds whose previous one ended.
  void StartDueRounds();
  void EnsureTick();
  uint64_t RoundLifetime() const;
  void StartRound(uint32_t partition, NodeId peer);
  // Compares one set of a sets reply with this replica's and acts on a
  // difference seen twice (a push, a pull, or a full exchange); `*pulls`
  // counts the reply's pulls. True if the set's bucket must be revisited
  // by the next round (a first sighting, or an action deferred).
  bool ActOnSet(NodeId from, uint32_t partition, Replica* replica,
                const SetSummary& theirs, size_t* pulls);
  // The suspect of `key`, marked seen now, or a new one if there is room
  // (made by evicting one acted on if need be); null if the map is full of
  // suspects awaiting their second sighting.
  Suspect* SightSuspect(const SuspectKey& key);
  // Records whether the sighting just made acted on the suspect.
  void SetActed(Suspect* suspect, bool acted);
  void EraseSuspect(const SuspectKey& key);
  // Forgets suspects not seen for kSuspectWaves waves of rounds.
  void ExpireSuspects();
  // Queues a push of the keys of `dots` (clipped to this replica's clock);
  // false if the queue is full (a push of the set already queued or
  // running counts as queued).
  bool QueuePush(NodeId peer, uint32_t partition, const std::string& set,
                 Clock dots);
  void StartQueuedPushes();
  // Opens the push's reader (a new snapshot) and sends its first chunk.
  bool BeginPush(Push* push);
  // Reads the push's next chunk and sends it (or keeps it for the rate
  // limit); false if reading failed (the push is dropped).
  bool SendNextChunk(Push* push);
  // Sends the chunk read last if the rate limit allows, else leaves it
  // waiting for a later tick.
  void SendInFlight(Push* push);
  void DropPush(uint64_t id);
  // Takes `bytes` from the rate limit; false if it must wait.
  bool TakeTokens(size_t bytes);
  void SendCounted(NodeId to, std::string bytes);
  template <typename Body>
  void SendMessage(NodeId to, uint64_t request_id, uint32_t partition,
                   const Body& body) {
    SendCounted(to, EncodeMessage(request_id, partition, body));
  }
  bool Serves(uint32_t partition, NodeId node) const;

  const NodeId self_;
  const PartitionRoles* const roles_;
  NodeCounters* const stats_;
  RequestIds* const ids_;
  const AntiEntropyOptions options_;
  // The current input's time and effects.
  uint64_t now_ = 0;
  ProtocolOutput out_;
  uint64_t rng_state_;
  uint64_t next_round_at_ = 0;
  bool tick_scheduled_ = false;

  std::map<uint64_t, Round> rounds_;                  // By request id.
  std::map<uint64_t, std::unique_ptr<Push>> pushes_;  // Running, by id.
  std::deque<std::unique_ptr<Push>> queued_;
  // Pushes being received; those received whole lately are remembered, so
  // that a retransmitted last chunk is answered again, not taken for an
  // unknown push.
  SetStreamReceiver receiver_;
  // At most kMaxSuspects. When full, a new sighting takes the place of one
  // acted on already, else waits for a later round (never a wholesale
  // clear, which would forget every first sighting before its second).
  absl::flat_hash_map<SuspectKey, Suspect> suspects_;
  // Least recently seen first: awaiting a second sighting, and acted on.
  std::list<SuspectKey> waiting_;
  std::list<SuspectKey> acted_;
  uint64_t wave_ = 0;  // RunRoundsNow calls.
  // Per (peer, partition): the buckets where the last round noted first
  // sightings or had to leave a confirmed difference for later; the next
  // round looks at them first, so that their second sighting comes.
  std::map<std::pair<NodeId, uint32_t>, std::vector<uint32_t>> revisit_;
  // Oldest first; indexed by (request id, peer) for acknowledgements.
  std::list<Hint> hints_;
  // (partition, peer) -> digest rounds due for dropped hints: answers
  // still needed, and rounds started (bounded: a peer that never answers
  // is left to the periodic rounds).
  struct DueRounds {
    int answers_needed = 2;
    int started = 0;
  };
  std::map<std::pair<uint32_t, NodeId>, DueRounds> rounds_due_;
  absl::flat_hash_map<std::pair<uint64_t, NodeId>, std::list<Hint>::iterator>
      hint_index_;
  size_t hint_bytes_ = 0;
  // The rate limit's bucket, in bytes.
  double tokens_ = 0;
  uint64_t tokens_at_ = 0;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_ANTI_ENTROPY_H_
