#include "cluster/anti_entropy.h"

#include <algorithm>
#include <cassert>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cluster/anti_entropy_internal.h"
#include "core/digest.h"

namespace bigset {

using anti_entropy_internal::kMaxBucketsPerRound;
using anti_entropy_internal::kMaxDueRounds;
using anti_entropy_internal::kMaxHintSends;
using anti_entropy_internal::kMaxQueuedPushes;
using anti_entropy_internal::kMaxRetries;
using anti_entropy_internal::kMaxRevisitBuckets;
using anti_entropy_internal::kMaxSummaryBytes;
using anti_entropy_internal::kMaxSuspects;
using anti_entropy_internal::kSuspectWaves;
using anti_entropy_internal::SplitMix;
using anti_entropy_internal::SummaryBytes;

AntiEntropy::AntiEntropy(NodeId self, const PartitionRoles* roles,
                         NodeCounters* stats, RequestIds* ids,
                         const AntiEntropyOptions& options)
    : self_(self),
      roles_(roles),
      stats_(stats),
      ids_(ids),
      options_(options),
      rng_state_(0x5eedae00ULL ^ self),
      receiver_(SetStreamReceiver::Limits{
          .max_streams = anti_entropy_internal::kMaxIncoming,
          .max_finished = anti_entropy_internal::kMaxFinishedPushes}) {}

AntiEntropy::~AntiEntropy() = default;

void AntiEntropy::StartTimer() {
  tokens_at_ = now_;
  tokens_ = static_cast<double>(options_.bytes_per_second);
  const uint64_t interval = options_.interval_micros;
  if (interval == 0) return;
  // The first round after a jittered interval: nodes started together do
  // not compare in lockstep.
  next_round_at_ = now_ + interval / 2 + SplitMix(&rng_state_) % interval;
  EnsureTick();
}

void AntiEntropy::EnsureTick() {
  if (tick_scheduled_) return;
  tick_scheduled_ = true;
  out_.Arm(kTick, options_.retry_micros);
}

ProtocolOutput AntiEntropy::OnTimer(uint32_t timer, uint64_t now) {
  assert(timer == kTick);
  (void)timer;
  return Run(now, [&] {
    tick_scheduled_ = false;  // First: a tick arms the next one in turn.
    Tick();
  });
}

bool AntiEntropy::Serves(uint32_t partition, NodeId node) const {
  const std::vector<NodeId>& list = roles_->ServingList(partition);
  return std::find(list.begin(), list.end(), node) != list.end();
}

void AntiEntropy::SendCounted(NodeId to, std::string bytes) {
  stats_->ae_bytes_sent += bytes.size();
  out_.Send(to, std::move(bytes));
}

bool AntiEntropy::TakeTokens(size_t bytes) {
  const uint64_t now = now_;
  const double rate = static_cast<double>(options_.bytes_per_second);
  if (rate <= 0) return true;  // Unlimited.
  tokens_ = std::min(
      rate, tokens_ + rate * static_cast<double>(now - tokens_at_) / 1e6);
  tokens_at_ = now;
  if (tokens_ < 0) return false;
  tokens_ -= static_cast<double>(bytes);
  return true;
}

uint64_t AntiEntropy::RoundLifetime() const {
  // Two intervals (a round whose reply was lost is started again by the
  // next one); rounds started by hand (interval 0) live ten retries.
  return std::max<uint64_t>(2 * options_.interval_micros,
                            10 * options_.retry_micros);
}

void AntiEntropy::StartRounds() {
  ++wave_;
  ExpireSuspects();
  const Ring& ring = roles_->ring();
  for (uint32_t p = 0; p < ring.ring_size(); ++p) {
    if (roles_->ServingReplica(p) == nullptr) continue;
    for (NodeId peer : roles_->ServingList(p)) {
      if (peer != self_) StartRound(p, peer);
    }
  }
}

void AntiEntropy::Tick() {
  const uint64_t now = now_;
  const uint64_t interval = options_.interval_micros;
  // Rounds that went silent.
  for (auto it = rounds_.begin(); it != rounds_.end();) {
    if (now - it->second.started > RoundLifetime()) {
      it = rounds_.erase(it);
    } else {
      ++it;
    }
  }
  if (interval > 0 && now >= next_round_at_) {
    next_round_at_ = now + interval / 2 + SplitMix(&rng_state_) % interval;
    StartRounds();
  }
  // Hints that are due, oldest first, within the rate limit.
  for (auto it = hints_.begin(); it != hints_.end();) {
    Hint& h = *it;
    if (h.next_send > now) {
      ++it;
      continue;
    }
    if (h.sends >= kMaxHintSends || !Serves(h.partition, h.peer)) {
      // The peer stayed silent (or no longer serves the partition): the
      // digest rounds find what it misses.
      auto next = std::next(it);
      DropHint(it);
      it = next;
      continue;
    }
    if (!TakeTokens(h.bytes.size())) break;
    ++h.sends;
    h.next_send = now + 5 * options_.retry_micros;
    ++stats_->ae_updates_sent;
    SendCounted(h.peer, h.bytes);
    ++it;
  }
  StartDueRounds();
  // Pushes: retransmissions, and chunks that waited for the rate limit.
  std::vector<uint64_t> drop;
  for (auto& [id, push] : pushes_) {
    if (push->waiting_tokens) {
      SendInFlight(push.get());
      continue;
    }
    if (now - push->sent_at < options_.retry_micros) continue;
    if (++push->retries > kMaxRetries) {
      ++stats_->ae_pushes_abandoned;
      drop.push_back(id);
      continue;
    }
    push->sent_at = now;
    const NodeId peer = push->peer;
    push->window.ForEach(
        [&](const std::string& bytes) { SendCounted(peer, bytes); });
  }
  for (uint64_t id : drop) DropPush(id);
  StartQueuedPushes();
  // Receiver states of pushes that went silent.
  receiver_.Expire(now, RoundLifetime() + 1);
  // Rounds run for ever; without them the timer runs while work is left.
  if (interval > 0 || !hints_.empty() || !pushes_.empty() || !queued_.empty() ||
      !rounds_.empty() || !receiver_.empty() || !rounds_due_.empty()) {
    EnsureTick();
  }
}

// ---- Hints.

void AntiEntropy::QueueHint(NodeId peer, uint32_t partition,
                            uint64_t request_id, const std::string& bytes) {
  if (options_.hint_bytes == 0) return;
  Hint h;
  h.peer = peer;
  h.partition = partition;
  h.request_id = request_id;
  h.bytes = bytes;
  h.next_send = now_;
  hint_bytes_ += h.bytes.size();
  const auto key = std::make_pair(request_id, peer);
  if (auto old = hint_index_.find(key); old != hint_index_.end()) {
    EraseHint(old->second);  // The same delta for the same peer: replaced.
  }
  hints_.push_back(std::move(h));
  hint_index_[key] = std::prev(hints_.end());
  EnsureTick();
  while (hint_bytes_ > options_.hint_bytes && !hints_.empty()) {
    DropHint(hints_.begin());
  }
}

void AntiEntropy::DropHint(std::list<Hint>::iterator it) {
  ++stats_->ae_hints_dropped;
  rounds_due_[std::make_pair(it->partition, it->peer)] = DueRounds();
  EraseHint(it);
  EnsureTick();
}

void AntiEntropy::StartDueRounds() {
  for (auto it = rounds_due_.begin(); it != rounds_due_.end();) {
    const auto [partition, peer] = it->first;
    if (!Serves(partition, peer) ||
        roles_->ServingReplica(partition) == nullptr) {
      it = rounds_due_.erase(it);  // Moved: the new owners' rounds.
      continue;
    }
    bool running = false;
    for (const auto& [id, r] : rounds_) {
      running |= r.partition == partition && r.peer == peer;
    }
    // Counted down by the peer's answers (OnDigestReply): a round the
    // peer never answered (still down) is started again once it expired.
    if (!running) {
      if (it->second.started == kMaxDueRounds) {
        it = rounds_due_.erase(it);
        continue;
      }
      ++it->second.started;
      StartRound(partition, peer);
      ++stats_->ae_hint_rounds;
    }
    ++it;
  }
}

std::list<AntiEntropy::Hint>::iterator AntiEntropy::EraseHint(
    std::list<Hint>::iterator it) {
  hint_bytes_ -= it->bytes.size();
  hint_index_.erase(std::make_pair(it->request_id, it->peer));
  return hints_.erase(it);
}

bool AntiEntropy::OnReplicateAck(uint64_t request_id, NodeId from,
                                 const absl::Status& status) {
  auto found = hint_index_.find(std::make_pair(request_id, from));
  if (found == hint_index_.end()) return false;
  // Applied, or refused for good (a delta the replica rejects, or a
  // partition it does not hold): either way resending cannot help; the
  // digest rounds find what is still missing.
  if (status.ok() || !absl::IsUnavailable(status)) EraseHint(found->second);
  return true;
}

// ---- Digest rounds: the initiator.

void AntiEntropy::StartRound(uint32_t partition, NodeId peer) {
  Replica* replica = roles_->ServingReplica(partition);
  if (replica == nullptr) return;
  for (const auto& [id, r] : rounds_) {
    if (r.partition == partition && r.peer == peer) return;  // Running.
  }
  const uint64_t id = ids_->Next();
  rounds_[id] = Round{partition, peer, now_, {}};
  EnsureTick();
  ++stats_->ae_rounds;
  SendMessage(peer, id, partition,
              msg::AeDigest{.digest = replica->PartitionDigest(),
                            .bucket_count = replica->digest_buckets()});
}

void AntiEntropy::OnMessage(NodeId from, const MessageHeader& header,
                            const msg::AeDigestReply& m) {
  auto it = rounds_.find(header.request_id);
  if (it == rounds_.end() || it->second.peer != from) return;
  const Round round = it->second;
  if (auto due = rounds_due_.find(std::make_pair(round.partition, from));
      due != rounds_due_.end() && --due->second.answers_needed <= 0) {
    rounds_due_.erase(due);
  }
  Replica* replica = roles_->ServingReplica(round.partition);
  if (!m.status.ok() || m.digests_equal || replica == nullptr) {
    if (m.status.ok() && m.digests_equal) ++stats_->ae_rounds_equal;
    rounds_.erase(it);
    return;
  }
  const std::vector<uint64_t> ours = replica->BucketDigests();
  if (m.bucket_digests.size() != ours.size()) {
    rounds_.erase(it);
    return;
  }
  // Buckets the last round asked to revisit first (their sets' second
  // sightings), then from a rotating offset, so that a round capped at
  // kMaxBucketsPerRound does not look at the same buckets every time.
  const size_t n = ours.size();
  std::vector<uint32_t> differ;
  std::vector<bool> taken(n, false);
  if (auto again = revisit_.find({from, round.partition});
      again != revisit_.end()) {
    for (uint32_t b : again->second) {
      if (differ.size() >= kMaxRevisitBuckets) break;
      if (b < n && !taken[b] && ours[b] != m.bucket_digests[b]) {
        taken[b] = true;
        differ.push_back(b);
      }
    }
  }
  const size_t start = SplitMix(&rng_state_) % n;
  for (size_t k = 0; k < n && differ.size() < kMaxBucketsPerRound; ++k) {
    const size_t b = (start + k) % n;
    if (!taken[b] && ours[b] != m.bucket_digests[b]) {
      taken[b] = true;
      differ.push_back(static_cast<uint32_t>(b));
    }
  }
  if (differ.empty()) {
    rounds_.erase(it);
    return;
  }
  // Our sets of those buckets, within kMaxSummaryBytes: when they do not
  // fit, the buckets last in `differ` are left to later rounds, whole (the
  // peer answers for every set of the buckets it is sent); the first one
  // is always kept. Memory stays within the bound plus one bucket.
  std::vector<int> rank(n, -1);
  for (size_t r = 0; r < differ.size(); ++r) {
    rank[differ[r]] = static_cast<int>(r);
  }
  std::vector<std::vector<SetSummary>> per(differ.size());
  std::vector<size_t> bytes(differ.size(), 0);
  size_t kept = differ.size();
  size_t total = 0;
  absl::Status listed =
      replica->ForEachSetSummary(differ, [&](SetSummary& summary) {
        const size_t r = static_cast<size_t>(
            rank[digest::BucketOf(summary.set, static_cast<uint32_t>(n))]);
        if (r >= kept) return true;
        const size_t b = SummaryBytes(summary);
        per[r].push_back(std::move(summary));
        bytes[r] += b;
        total += b;
        while (total > kMaxSummaryBytes && kept > 1) {
          --kept;
          total -= bytes[kept];
          per[kept] = std::vector<SetSummary>();
        }
        return true;
      });
  if (!listed.ok()) {
    rounds_.erase(it);
    return;
  }
  differ.resize(kept);
  it->second.buckets = differ;
  msg::AeSets out;
  out.bucket_ids.assign(differ.begin(), differ.end());
  for (size_t r = 0; r < kept; ++r) {
    for (SetSummary& summary : per[r]) {
      out.summaries.push_back(std::move(summary));
    }
  }
  stats_->ae_sets_compared += out.summaries.size();
  SendMessage(from, header.request_id, round.partition, out);
}

void AntiEntropy::OnMessage(NodeId from, const MessageHeader& header,
                            const msg::AeSetsReply& m) {
  auto it = rounds_.find(header.request_id);
  if (it == rounds_.end() || it->second.peer != from) return;
  const Round round = std::move(it->second);
  rounds_.erase(it);
  Replica* replica = roles_->ServingReplica(round.partition);
  if (!m.status.ok() || replica == nullptr) return;
  // The peer's summaries in the order of the round's buckets (revisited
  // ones first): when the suspects have room for only some sightings, they
  // go to the buckets the next round looks at first. Sets of other buckets
  // were not asked about.
  const uint32_t n = replica->digest_buckets();
  std::vector<int> rank(n, -1);
  for (size_t r = 0; r < round.buckets.size(); ++r) {
    if (round.buckets[r] < n) rank[round.buckets[r]] = static_cast<int>(r);
  }
  std::vector<std::pair<int, const SetSummary*>> order;
  for (const SetSummary& theirs : m.summaries) {
    const uint32_t bucket = digest::BucketOf(theirs.set, n);
    if (rank[bucket] >= 0) order.emplace_back(rank[bucket], &theirs);
  }
  std::stable_sort(
      order.begin(), order.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  // Buckets the next round revisits: where a first sighting was noted, or a
  // confirmed difference could not be acted on yet (queues full).
  std::set<uint32_t> again;
  // Pulls sent by this reply: the peer queues at most kMaxQueuedPushes.
  size_t pulls = 0;
  for (const auto& [r, theirs] : order) {
    if (ActOnSet(from, round.partition, replica, *theirs, &pulls)) {
      again.insert(round.buckets[r]);
    }
  }
  std::vector<uint32_t>& revisit = revisit_[{from, round.partition}];
  revisit.clear();
  // In the round's order: the first ones are revisited if not all fit.
  for (uint32_t b : round.buckets) {
    if (again.contains(b)) revisit.push_back(b);
  }
  StartQueuedPushes();
}

bool AntiEntropy::ActOnSet(NodeId from, uint32_t partition, Replica* replica,
                           const SetSummary& theirs, size_t* pulls) {
  const SuspectKey key = std::make_tuple(from, partition, theirs.set);
  absl::StatusOr<SetSummary> ours = replica->Summarize(theirs.set);
  if (!ours.ok()) return false;
  if (ours->digest == theirs.digest) {  // Converged meanwhile.
    EraseSuspect(key);
    return false;
  }
  Clock push = Clock::Complement(ours->clock, theirs.clock);
  Clock pull = Clock::Complement(theirs.clock, ours->clock);
  Suspect* suspect = SightSuspect(key);
  if (suspect == nullptr) return false;  // No room: a later round notes it.
  SetActed(suspect, false);
  // A difference is acted on only when an earlier sighting saw it too:
  // what writes and hints in flight will bring is not pushed (a push
  // reads the whole set to find its dots).
  bool full = false;
  if (push.empty() && pull.empty()) {
    suspect->dots = false;
    suspect->push = Clock();
    suspect->pull = Clock();
    // Same events, different tombstone emptiness only: a sweep pending
    // on one side, which changes nothing of the set's value.
    if (ours->keys_digest == theirs.keys_digest) {
      EraseSuspect(key);
      return false;
    }
    // Same events, different keys: a remove or a clear one side missed
    // (or one in flight, or keys a pending sweep has not deleted yet).
    const uint64_t diff = ours->keys_digest - theirs.keys_digest;
    if (!suspect->keys || suspect->keys_diff != diff) {
      suspect->keys = true;
      suspect->keys_diff = diff;
      suspect->exchanged = false;
      return true;
    }
    if (!ours->tombstone_empty || !theirs.tombstone_empty) {
      // The keys under a tombstone count until swept, so the difference
      // may be those: one exchange per difference, not one per round,
      // while a sweep is pending (a set cleared often may never show
      // both tombstones empty).
      if (suspect->exchanged) {
        SetActed(suspect, true);
        return false;
      }
      suspect->exchanged = true;
    } else {
      suspect->keys = false;  // Another needs two more sightings.
    }
    full = true;
    push = ours->clock;
    pull = theirs.clock;
  } else {
    const bool first = !suspect->dots;
    Clock seen_push = std::move(suspect->push);
    Clock seen_pull = std::move(suspect->pull);
    suspect->dots = true;
    suspect->push = push;
    suspect->pull = pull;
    if (first) {
      return true;
    }
    push = Clock::Intersection(push, seen_push);
    pull = Clock::Intersection(pull, seen_pull);
  }
  bool acted = false;
  bool deferred = false;
  if (!push.empty()) {
    if (QueuePush(from, partition, theirs.set, std::move(push))) {
      acted = true;
    } else {
      deferred = true;
    }
  }
  if (!pull.empty()) {
    if (*pulls < kMaxQueuedPushes) {
      ++*pulls;
      SendMessage(from, ids_->Next(), partition,
                  msg::AePull{.set = theirs.set, .dots = std::move(pull)});
      acted = true;
    } else {
      deferred = true;
    }
  }
  if (deferred) {
    // Acted on at the next sighting, which the next round brings.
    if (full) {
      suspect->keys = true;
      suspect->exchanged = false;
    }
  }
  SetActed(suspect, acted && !deferred);
  if (full && acted) ++stats_->ae_full_exchanges;
  if (acted) ++stats_->ae_sets_repaired;
  return deferred;
}

AntiEntropy::Suspect* AntiEntropy::SightSuspect(const SuspectKey& key) {
  auto it = suspects_.find(key);
  if (it != suspects_.end()) {
    std::list<SuspectKey>& list = it->second.acted ? acted_ : waiting_;
    list.splice(list.end(), list, it->second.lru);
    it->second.wave = wave_;
    return &it->second;
  }
  ExpireSuspects();
  if (suspects_.size() >= kMaxSuspects) {
    // A suspect acted on has served its purpose; if its repair fails, a
    // later round notes the set again.
    if (acted_.empty()) return nullptr;
    suspects_.erase(acted_.front());
    acted_.pop_front();
  }
  Suspect& suspect = suspects_[key];
  suspect.wave = wave_;
  suspect.lru = waiting_.insert(waiting_.end(), key);
  return &suspect;
}

void AntiEntropy::SetActed(Suspect* suspect, bool acted) {
  if (suspect->acted == acted) return;
  std::list<SuspectKey>& from = suspect->acted ? acted_ : waiting_;
  std::list<SuspectKey>& to = acted ? acted_ : waiting_;
  to.splice(to.end(), from, suspect->lru);
  suspect->acted = acted;
}

void AntiEntropy::EraseSuspect(const SuspectKey& key) {
  auto it = suspects_.find(key);
  if (it == suspects_.end()) return;
  (it->second.acted ? acted_ : waiting_).erase(it->second.lru);
  suspects_.erase(it);
}

void AntiEntropy::ExpireSuspects() {
  for (std::list<SuspectKey>* list : {&waiting_, &acted_}) {
    while (!list->empty()) {
      auto it = suspects_.find(list->front());
      if (it->second.wave + kSuspectWaves > wave_) break;
      suspects_.erase(it);
      list->pop_front();
    }
  }
}

// ---- Digest rounds: the peer.

void AntiEntropy::OnMessage(NodeId from, const MessageHeader& header,
                            const msg::AeDigest& m) {
  msg::AeDigestReply out;
  Replica* replica = roles_->ServingReplica(header.partition);
  if (replica == nullptr) {
    out.status = absl::FailedPreconditionError("partition not held here");
  } else if (m.bucket_count != replica->digest_buckets()) {
    out.status = absl::InvalidArgumentError(
        absl::StrCat("digest buckets differ: ", m.bucket_count, " vs ",
                     replica->digest_buckets()));
  } else if (m.digest == replica->PartitionDigest()) {
    out.digests_equal = true;
  } else {
    out.bucket_digests = replica->BucketDigests();
  }
  SendMessage(from, header.request_id, header.partition, out);
}

void AntiEntropy::OnMessage(NodeId from, const MessageHeader& header,
                            const msg::AeSets& m) {
  msg::AeSetsReply out;
  auto reply = [&]() {
    SendMessage(from, header.request_id, header.partition, out);
  };
  Replica* replica = roles_->ServingReplica(header.partition);
  if (replica == nullptr) {
    out.status = absl::FailedPreconditionError("partition not held here");
    reply();
    return;
  }
  if (m.bucket_ids.size() > kMaxBucketsPerRound) {
    // A round asks about at most that many: the work of an answer follows
    // the difference, never the partition.
    out.status = absl::InvalidArgumentError(
        absl::StrCat("too many buckets: ", m.bucket_ids.size()));
    reply();
    return;
  }
  std::vector<uint32_t> buckets;
  for (uint64_t b : m.bucket_ids) {
    if (b < replica->digest_buckets())
      buckets.push_back(static_cast<uint32_t>(b));
  }
  // The initiator's digests, and whether we hold the set.
  struct Theirs {
    uint64_t digest = 0;
    bool ours = false;
  };
  absl::flat_hash_map<std::string, Theirs> theirs;
  for (const SetSummary& s : m.summaries) theirs[s.set].digest = s.digest;
  size_t bytes = 0;
  auto add = [&](SetSummary s) {
    bytes += SummaryBytes(s);
    out.summaries.push_back(std::move(s));
  };
  // Our sets of those buckets, one summary at a time; the clock is read
  // only for those that differ, and the answer stops at kMaxSummaryBytes.
  // `cut`: the first of our sets not looked at (its name and those after
  // it are not known to be missing here).
  std::optional<std::string> cut;
  size_t compared = 0;
  absl::Status listed = replica->ForEachSetSummary(buckets, [&](SetSummary& s) {
    ++compared;
    auto t = theirs.find(s.set);
    if (t != theirs.end()) {
      t->second.ours = true;
      if (t->second.digest == s.digest) return true;
    }
    if (bytes > kMaxSummaryBytes) {
      cut = s.set;
      return false;
    }
    absl::StatusOr<SetSummary> full = replica->Summarize(s.set);
    if (full.ok()) add(*std::move(full));
    return true;
  });
  if (!listed.ok()) {
    out.status = listed;
    out.summaries.clear();
    reply();
    return;
  }
  // Sets only the initiator has: an empty summary (it pushes them all).
  for (const SetSummary& s : m.summaries) {
    if (bytes > kMaxSummaryBytes) break;
    if (cut.has_value() && s.set >= *cut) continue;
    Theirs& t = theirs[s.set];
    if (t.ours) continue;
    t.ours = true;  // Once, if the initiator named it twice.
    SetSummary empty;
    empty.set = s.set;
    add(std::move(empty));
  }
  stats_->ae_sets_compared += compared;
  reply();
}

void AntiEntropy::OnMessage(NodeId from, const MessageHeader& header,
                            const msg::AePull& m) {
  if (roles_->ServingReplica(header.partition) == nullptr) return;
  if (!Serves(header.partition, from)) return;
  QueuePush(from, header.partition, m.set, m.dots);
  StartQueuedPushes();
}

void AntiEntropy::FillStats(NodeCounters* stats) const {
  stats->ae_hints = hints_.size();
  stats->ae_hint_bytes = hint_bytes_;
  stats->ae_pushes_running = pushes_.size() + queued_.size();
}

}  // namespace bigset
