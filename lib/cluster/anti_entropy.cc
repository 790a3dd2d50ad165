#include "cluster/anti_entropy.h"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/digest.h"

namespace bigset {

struct AntiEntropy::Push {
  uint64_t id = 0;
  NodeId peer = 0;
  uint32_t partition = 0;
  std::string set;
  Clock dots;
  std::unique_ptr<SetReader> reader;
  // What the reader fills and what a chunk is built from, kept from chunk
  // to chunk: their strings and vectors keep their capacity, so a steady
  // push allocates nothing per element.
  std::vector<ElementDots> batch;
  std::vector<ElementDots> chunk;
  uint64_t seq = 0;
  bool done = false;      // The last chunk is the one in flight.
  std::string in_flight;  // The chunk awaiting its acknowledgement.
  size_t in_flight_keys = 0;
  bool waiting_tokens = false;
  uint64_t sent_at = 0;
  int retries = 0;
  int restarts = 0;
};

namespace {

// Buckets and set summaries one round looks at: bounds its messages and
// the memory that builds them; what is left is found by later rounds. At
// most kMaxRevisitBuckets of a round's buckets are revisited ones, so that
// the others keep being looked at too.
constexpr size_t kMaxBucketsPerRound = 64;
constexpr size_t kMaxRevisitBuckets = 48;
constexpr size_t kMaxSummaryBytes = 512 << 10;
// Pushes running at once, and queued.
constexpr size_t kMaxRunningPushes = 4;
constexpr size_t kMaxQueuedPushes = 1024;
// Receiver states kept, and how long an idle one lives.
constexpr size_t kMaxIncoming = 64;
// Differences awaiting their second sighting, and how many waves of rounds
// one lives unseen.
constexpr size_t kMaxSuspects = 4096;
constexpr uint64_t kSuspectWaves = 8;
// Retransmissions of one chunk before the push is dropped (the next round
// finds the difference again).
constexpr int kMaxRetries = 30;
constexpr int kMaxRestarts = 5;
// Sends of one hint before it is dropped.
constexpr int kMaxHintSends = 20;

uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

size_t ChunkBytes(const ElementDots& e) {
  return e.element.size() + 16 * e.dots.size() + 4;
}

// About the bytes of a summary in a message.
size_t SummaryBytes(const SetSummary& s) {
  return s.set.size() + 32 + (s.clock.empty() ? 0 : s.clock.Encode().size());
}

}  // namespace

AntiEntropy::AntiEntropy(CoordinatorHost* host, const NodeOptions& options)
    : host_(host),
      options_(options),
      alive_(std::make_shared<bool>(true)),
      rng_state_(0x5eedae00ULL ^ host->node_id()) {}

AntiEntropy::~AntiEntropy() = default;

void AntiEntropy::Start() {
  tokens_at_ = host_->NowMicros();
  tokens_ = static_cast<double>(options_.anti_entropy_bytes_per_second);
  const uint64_t interval = options_.anti_entropy_interval_micros;
  if (interval == 0) return;
  // The first round after a jittered interval: nodes started together do
  // not compare in lockstep.
  next_round_at_ =
      host_->NowMicros() + interval / 2 + SplitMix(&rng_state_) % interval;
  EnsureTick();
}

void AntiEntropy::EnsureTick() {
  if (tick_scheduled_) return;
  tick_scheduled_ = true;
  host_->After(options_.handoff_retry_micros,
               [token = std::weak_ptr<bool>(alive_), this] {
                 if (token.expired()) return;
                 tick_scheduled_ = false;
                 Tick();
               });
}

bool AntiEntropy::Serves(uint32_t partition, NodeId node) const {
  const std::vector<NodeId>& list = host_->ServingList(partition);
  return std::find(list.begin(), list.end(), node) != list.end();
}

void AntiEntropy::SendCounted(NodeId to, std::string bytes) {
  host_->stats().ae_bytes_sent += bytes.size();
  host_->Send(to, std::move(bytes));
}

void AntiEntropy::SendReply(NodeId to, const Message& m) {
  SendCounted(to, m.Encode());
}

bool AntiEntropy::TakeTokens(size_t bytes) {
  const uint64_t now = host_->NowMicros();
  const double rate =
      static_cast<double>(options_.anti_entropy_bytes_per_second);
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
  return std::max<uint64_t>(2 * options_.anti_entropy_interval_micros,
                            10 * options_.handoff_retry_micros);
}

void AntiEntropy::RunRoundsNow() {
  ++wave_;
  ExpireSuspects();
  const Ring& ring = host_->ring();
  for (uint32_t p = 0; p < ring.ring_size(); ++p) {
    if (host_->ServingReplica(p) == nullptr) continue;
    for (NodeId peer : host_->ServingList(p)) {
      if (peer != host_->node_id()) StartRound(p, peer);
    }
  }
}

void AntiEntropy::Tick() {
  const uint64_t now = host_->NowMicros();
  const uint64_t interval = options_.anti_entropy_interval_micros;
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
    RunRoundsNow();
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
      ++host_->stats().ae_hints_dropped;
      it = EraseHint(it);
      continue;
    }
    if (!TakeTokens(h.bytes.size())) break;
    ++h.sends;
    h.next_send = now + 5 * options_.handoff_retry_micros;
    ++host_->stats().ae_updates_sent;
    SendCounted(h.peer, h.bytes);
    ++it;
  }
  // Pushes: retransmissions, and chunks that waited for the rate limit.
  std::vector<uint64_t> drop;
  for (auto& [id, push] : pushes_) {
    if (push->waiting_tokens) {
      SendInFlight(push.get());
      continue;
    }
    if (now - push->sent_at < options_.handoff_retry_micros) continue;
    if (++push->retries > kMaxRetries) {
      ++host_->stats().ae_pushes_abandoned;
      drop.push_back(id);
      continue;
    }
    push->sent_at = now;
    SendCounted(push->peer, push->in_flight);
  }
  for (uint64_t id : drop) DropPush(id);
  StartQueuedPushes();
  // Receiver states of pushes that went silent.
  for (auto it = incoming_.begin(); it != incoming_.end();) {
    if (now - it->second.last_active > RoundLifetime()) {
      it = incoming_.erase(it);
    } else {
      ++it;
    }
  }
  // Rounds run for ever; without them the timer runs while work is left.
  if (interval > 0 || !hints_.empty() || !pushes_.empty() || !queued_.empty() ||
      !rounds_.empty() || !incoming_.empty()) {
    EnsureTick();
  }
}

// ---- Hints.

void AntiEntropy::AddHint(NodeId peer, uint32_t partition, uint64_t request_id,
                          const std::string& bytes) {
  if (options_.anti_entropy_hint_bytes == 0) return;
  Hint h;
  h.peer = peer;
  h.partition = partition;
  h.request_id = request_id;
  h.bytes = bytes;
  h.next_send = host_->NowMicros();
  hint_bytes_ += h.bytes.size();
  const auto key = std::make_pair(request_id, peer);
  if (auto old = hint_index_.find(key); old != hint_index_.end()) {
    EraseHint(old->second);  // The same delta for the same peer: replaced.
  }
  hints_.push_back(std::move(h));
  hint_index_[key] = std::prev(hints_.end());
  EnsureTick();
  while (hint_bytes_ > options_.anti_entropy_hint_bytes && !hints_.empty()) {
    EraseHint(hints_.begin());
    ++host_->stats().ae_hints_dropped;
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
  Replica* replica = host_->ServingReplica(partition);
  if (replica == nullptr) return;
  for (const auto& [id, r] : rounds_) {
    if (r.partition == partition && r.peer == peer) return;  // Running.
  }
  const uint64_t id = host_->NextRequestId();
  rounds_[id] = Round{partition, peer, host_->NowMicros(), {}};
  EnsureTick();
  ++host_->stats().ae_rounds;
  Message m;
  m.header = MessageHeader{MessageType::kAeDigest, id, partition};
  m.digest = replica->PartitionDigest();
  m.index = replica->digest_buckets();
  SendReply(peer, m);
}

void AntiEntropy::OnDigestReply(NodeId from, const Message& m) {
  auto it = rounds_.find(m.header.request_id);
  if (it == rounds_.end() || it->second.peer != from) return;
  const Round round = it->second;
  Replica* replica = host_->ServingReplica(round.partition);
  if (!m.status.ok() || m.done || replica == nullptr) {
    if (m.status.ok() && m.done) ++host_->stats().ae_rounds_equal;
    rounds_.erase(it);
    return;
  }
  const std::vector<uint64_t> ours = replica->BucketDigests();
  if (m.numbers.size() != ours.size()) {
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
      if (b < n && !taken[b] && ours[b] != m.numbers[b]) {
        taken[b] = true;
        differ.push_back(b);
      }
    }
  }
  const size_t start = SplitMix(&rng_state_) % n;
  for (size_t k = 0; k < n && differ.size() < kMaxBucketsPerRound; ++k) {
    const size_t b = (start + k) % n;
    if (!taken[b] && ours[b] != m.numbers[b]) {
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
  Message out;
  out.header =
      MessageHeader{MessageType::kAeSets, m.header.request_id, round.partition};
  out.numbers.assign(differ.begin(), differ.end());
  for (size_t r = 0; r < kept; ++r) {
    for (SetSummary& summary : per[r]) {
      out.summaries.push_back(std::move(summary));
    }
  }
  host_->stats().ae_sets_compared += out.summaries.size();
  SendReply(from, out);
}

void AntiEntropy::OnSetsReply(NodeId from, const Message& m) {
  auto it = rounds_.find(m.header.request_id);
  if (it == rounds_.end() || it->second.peer != from) return;
  const Round round = std::move(it->second);
  rounds_.erase(it);
  Replica* replica = host_->ServingReplica(round.partition);
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
  for (const auto& [r, theirs_ptr] : order) {
    const SetSummary& theirs = *theirs_ptr;
    const uint32_t bucket = round.buckets[r];
    const SuspectKey key = std::make_tuple(from, round.partition, theirs.set);
    absl::StatusOr<SetSummary> ours = replica->Summarize(theirs.set);
    if (!ours.ok()) continue;
    if (ours->digest == theirs.digest) {  // Converged meanwhile.
      EraseSuspect(key);
      continue;
    }
    Clock push = Clock::Complement(ours->clock, theirs.clock);
    Clock pull = Clock::Complement(theirs.clock, ours->clock);
    Suspect* suspect = SightSuspect(key);
    if (suspect == nullptr) continue;  // No room: a later round notes it.
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
        continue;
      }
      // Same events, different keys: a remove or a clear one side missed
      // (or one in flight, or keys a pending sweep has not deleted yet).
      const uint64_t diff = ours->keys_digest - theirs.keys_digest;
      if (!suspect->keys || suspect->keys_diff != diff) {
        suspect->keys = true;
        suspect->keys_diff = diff;
        suspect->exchanged = false;
        again.insert(bucket);
        continue;
      }
      if (!ours->tombstone_empty || !theirs.tombstone_empty) {
        // The keys under a tombstone count until swept, so the difference
        // may be those: one exchange per difference, not one per round,
        // while a sweep is pending (a set cleared often may never show
        // both tombstones empty).
        if (suspect->exchanged) {
          SetActed(suspect, true);
          continue;
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
        again.insert(bucket);
        continue;
      }
      push = Clock::Intersection(push, seen_push);
      pull = Clock::Intersection(pull, seen_pull);
    }
    bool acted = false;
    bool deferred = false;
    if (!push.empty()) {
      if (QueuePush(from, round.partition, theirs.set, std::move(push))) {
        acted = true;
      } else {
        deferred = true;
      }
    }
    if (!pull.empty()) {
      if (pulls < kMaxQueuedPushes) {
        ++pulls;
        Message out;
        out.header = MessageHeader{MessageType::kAePull, host_->NextRequestId(),
                                   round.partition};
        out.set = theirs.set;
        out.clock = std::move(pull);
        SendReply(from, out);
        acted = true;
      } else {
        deferred = true;
      }
    }
    if (deferred) {
      // Acted on at the next sighting, which the next round brings.
      again.insert(bucket);
      if (full) {
        suspect->keys = true;
        suspect->exchanged = false;
      }
    }
    SetActed(suspect, acted && !deferred);
    if (full && acted) ++host_->stats().ae_full_exchanges;
    if (acted) ++host_->stats().ae_sets_repaired;
  }
  std::vector<uint32_t>& revisit = revisit_[{from, round.partition}];
  revisit.clear();
  // In the round's order: the first ones are revisited if not all fit.
  for (uint32_t b : round.buckets) {
    if (again.contains(b)) revisit.push_back(b);
  }
  StartQueuedPushes();
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

void AntiEntropy::OnDigest(NodeId from, const Message& m) {
  Message out;
  out.header = MessageHeader{MessageType::kAeDigestReply, m.header.request_id,
                             m.header.partition};
  Replica* replica = host_->ServingReplica(m.header.partition);
  if (replica == nullptr) {
    out.status = absl::FailedPreconditionError("partition not held here");
  } else if (m.index != replica->digest_buckets()) {
    out.status = absl::InvalidArgumentError(absl::StrCat(
        "digest buckets differ: ", m.index, " vs ", replica->digest_buckets()));
  } else if (m.digest == replica->PartitionDigest()) {
    out.done = true;
  } else {
    out.numbers = replica->BucketDigests();
  }
  SendReply(from, out);
}

void AntiEntropy::OnSets(NodeId from, const Message& m) {
  Message out;
  out.header = MessageHeader{MessageType::kAeSetsReply, m.header.request_id,
                             m.header.partition};
  Replica* replica = host_->ServingReplica(m.header.partition);
  if (replica == nullptr) {
    out.status = absl::FailedPreconditionError("partition not held here");
    SendReply(from, out);
    return;
  }
  if (m.numbers.size() > kMaxBucketsPerRound) {
    // A round asks about at most that many: the work of an answer follows
    // the difference, never the partition.
    out.status = absl::InvalidArgumentError(
        absl::StrCat("too many buckets: ", m.numbers.size()));
    SendReply(from, out);
    return;
  }
  std::vector<uint32_t> buckets;
  for (uint64_t b : m.numbers) {
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
    SendReply(from, out);
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
  host_->stats().ae_sets_compared += compared;
  SendReply(from, out);
}

void AntiEntropy::OnPull(NodeId from, const Message& m) {
  if (host_->ServingReplica(m.header.partition) == nullptr) return;
  if (!Serves(m.header.partition, from)) return;
  QueuePush(from, m.header.partition, m.set, m.clock);
  StartQueuedPushes();
}

// ---- Pushes: the sender.

bool AntiEntropy::QueuePush(NodeId peer, uint32_t partition,
                            const std::string& set, Clock dots) {
  // One push per (peer, set) at a time: the next round asks again.
  for (const auto& [id, p] : pushes_) {
    if (p->peer == peer && p->partition == partition && p->set == set) {
      return true;
    }
  }
  for (const auto& p : queued_) {
    if (p->peer == peer && p->partition == partition && p->set == set) {
      return true;
    }
  }
  if (queued_.size() >= kMaxQueuedPushes) return false;
  auto push = std::make_unique<Push>();
  push->peer = peer;
  push->partition = partition;
  push->set = set;
  push->dots = std::move(dots);
  queued_.push_back(std::move(push));
  EnsureTick();
  return true;
}

void AntiEntropy::StartQueuedPushes() {
  while (pushes_.size() < kMaxRunningPushes && !queued_.empty()) {
    std::unique_ptr<Push> push = std::move(queued_.front());
    queued_.pop_front();
    push->id = host_->NextRequestId();
    Push* p = push.get();
    pushes_[p->id] = std::move(push);
    if (!BeginPush(p)) DropPush(p->id);
  }
}

bool AntiEntropy::BeginPush(Push* push) {
  Replica* replica = host_->ServingReplica(push->partition);
  if (replica == nullptr) return false;
  SetReadOptions ro;
  ro.batch_size = options_.max_chunk_elements;
  ro.max_chunk_bytes = options_.anti_entropy_chunk_bytes;
  absl::StatusOr<std::unique_ptr<SetReader>> reader =
      replica->Read(push->set, ro);
  if (!reader.ok()) return false;
  push->reader = std::move(*reader);
  // Only dots this snapshot has seen: a replica that lost some (power
  // loss) must not claim them, or the receiver would take them for removed.
  push->dots = Clock::Intersection(push->dots, push->reader->clock());
  push->seq = 0;
  push->done = false;
  return SendNextChunk(push);
}

bool AntiEntropy::SendNextChunk(Push* push) {
  std::vector<ElementDots>& elements = push->chunk;
  size_t n = 0;
  size_t bytes = 0;
  bool end = false;
  while (bytes < options_.anti_entropy_chunk_bytes) {
    absl::StatusOr<bool> more = push->reader->Next(&push->batch);
    if (!more.ok()) return false;
    if (!*more) {
      end = true;
      break;
    }
    host_->stats().ae_keys_read += push->batch.size();
    for (ElementDots& e : push->batch) {
      std::erase_if(e.dots, [&](Dot d) { return !push->dots.Seen(d); });
      if (e.dots.empty()) continue;
      bytes += ChunkBytes(e);
      // Swapped, not moved: the batch gets back an entry with capacity.
      if (n == elements.size()) elements.emplace_back();
      std::swap(elements[n++], e);
    }
  }
  elements.resize(n);
  Message m;
  m.header = MessageHeader{MessageType::kAePush, push->id, push->partition};
  m.set = push->set;
  m.seq = push->seq;
  m.done = end;
  if (end) m.clock = push->dots;
  m.elements = std::move(elements);
  push->in_flight = m.Encode();
  push->in_flight_keys = m.elements.size();
  elements = std::move(m.elements);
  push->done = end;
  push->waiting_tokens = true;
  SendInFlight(push);
  return true;
}

void AntiEntropy::SendInFlight(Push* push) {
  // Without tokens the chunk waits for a later tick: it was read from the
  // snapshot already and must be the next one sent (the last chunk's clock
  // claims every key before it was sent).
  if (!TakeTokens(push->in_flight.size())) return;
  push->waiting_tokens = false;
  push->sent_at = host_->NowMicros();
  push->retries = 0;
  host_->stats().ae_keys_pushed += push->in_flight_keys;
  SendCounted(push->peer, push->in_flight);
}

void AntiEntropy::DropPush(uint64_t id) { pushes_.erase(id); }

void AntiEntropy::OnPushAck(NodeId from, const Message& m) {
  auto it = pushes_.find(m.header.request_id);
  if (it == pushes_.end() || it->second->peer != from) return;
  Push* push = it->second.get();
  if (push->waiting_tokens || m.seq != push->seq) return;  // Stale.
  if (!m.status.ok()) {
    if (absl::IsNotFound(m.status) && ++push->restarts <= kMaxRestarts) {
      // The receiver lost the push's state: again from a new snapshot,
      // under a new id (never mixing two snapshots' chunks).
      std::unique_ptr<Push> again = std::move(it->second);
      pushes_.erase(it);
      again->id = host_->NextRequestId();
      Push* p = again.get();
      pushes_[p->id] = std::move(again);
      if (!BeginPush(p)) DropPush(p->id);
      return;
    }
    ++host_->stats().ae_pushes_abandoned;
    pushes_.erase(it);
    StartQueuedPushes();
    return;
  }
  if (push->done) {
    pushes_.erase(it);
    StartQueuedPushes();
    return;
  }
  ++push->seq;
  // A chunk waiting for the rate limit is retried by the tick.
  if (!SendNextChunk(push)) {
    pushes_.erase(it);
    StartQueuedPushes();
  }
}

// ---- Pushes: the receiver.

void AntiEntropy::OnPush(NodeId from, const Message& m) {
  Message ack;
  ack.header = MessageHeader{MessageType::kAePushAck, m.header.request_id,
                             m.header.partition};
  ack.seq = m.seq;
  Replica* replica = host_->ServingReplica(m.header.partition);
  const auto key = std::make_pair(from, m.header.request_id);
  auto it = incoming_.find(key);
  if (it == incoming_.end() &&
      std::find(finished_.begin(), finished_.end(), key) != finished_.end()) {
    SendReply(from, ack);  // Its last chunk again: applied already.
    return;
  }
  if (replica == nullptr) {
    ack.status = absl::FailedPreconditionError("partition not held here");
  } else if (it == incoming_.end() && m.seq != 0) {
    ack.status = absl::NotFoundError("unknown push (restart it)");
  } else if (it != incoming_.end() && m.seq < it->second.next_seq) {
    // A retransmission of a chunk applied already.
  } else if (it != incoming_.end() && m.seq > it->second.next_seq) {
    ack.status = absl::NotFoundError("push chunks out of order");
    incoming_.erase(it);
  } else if (it != incoming_.end() && it->second.set != m.set) {
    ack.status = absl::NotFoundError("push names another set");
    incoming_.erase(it);
  } else {
    if (it == incoming_.end()) {
      if (incoming_.size() >= kMaxIncoming) {
        // Drop the idlest: its sender restarts it.
        auto idlest = incoming_.begin();
        for (auto i = incoming_.begin(); i != incoming_.end(); ++i) {
          if (i->second.last_active < idlest->second.last_active) idlest = i;
        }
        incoming_.erase(idlest);
      }
      Incoming in;
      in.set = m.set;
      in.partition = m.header.partition;
      it = incoming_.emplace(key, std::move(in)).first;
    }
    Incoming& in = it->second;
    in.last_active = host_->NowMicros();
    absl::Status s =
        replica->ApplyTransferChunk(m.set, m.elements, &in.tracker);
    if (s.ok() && m.done)
      s = replica->FinishTransfer(m.set, m.clock, in.tracker);
    if (s.ok()) {
      host_->stats().ae_keys_received += m.elements.size();
      if (m.done) {
        incoming_.erase(it);
        finished_.push_back(key);
        if (finished_.size() > 256) finished_.pop_front();
      } else {
        ++in.next_seq;
      }
    } else {
      // Not applied: the sender retries the same chunk, or gives up.
      ack.status = s;
      if (s.code() == absl::StatusCode::kInvalidArgument) incoming_.erase(it);
    }
  }
  SendReply(from, ack);
}

void AntiEntropy::Handle(NodeId from, Message& m) {
  switch (m.type()) {
    case MessageType::kAeDigest:
      OnDigest(from, m);
      break;
    case MessageType::kAeDigestReply:
      OnDigestReply(from, m);
      break;
    case MessageType::kAeSets:
      OnSets(from, m);
      break;
    case MessageType::kAeSetsReply:
      OnSetsReply(from, m);
      break;
    case MessageType::kAePull:
      OnPull(from, m);
      break;
    case MessageType::kAePush:
      OnPush(from, m);
      break;
    case MessageType::kAePushAck:
      OnPushAck(from, m);
      break;
    default:
      break;
  }
}

void AntiEntropy::FillStats(Node::Stats* stats) const {
  stats->ae_hints = hints_.size();
  stats->ae_hint_bytes = hint_bytes_;
  stats->ae_pushes_running = pushes_.size() + queued_.size();
}

}  // namespace bigset
