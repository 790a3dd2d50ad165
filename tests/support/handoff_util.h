// Helpers shared by the membership-change tests (handoff_test,
// handoff_attack_test, membership_attack_test): a model of what
// acknowledged writes say of each element, a writer that keeps it, a small
// cluster whose transfers faults can hit in the middle, whether a
// simulated cluster has finished its hand-offs, and the steps that end an
// attack (quieting the network, restarting the nodes down).

#ifndef BIGSET_TESTS_HANDOFF_UTIL_H_
#define BIGSET_TESTS_HANDOFF_UTIL_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bigset/core/element_dots.h"
#include "bigset/testing/sim.h"
#include "test_util.h"

namespace bigset::testing {

// What the acknowledged writes say of an element: present, absent, or
// unknown (a write that failed may or may not have been applied).
enum class Known { kPresent, kAbsent, kUnknown };

struct KnownModel {
  // set -> element -> what is known of it.
  std::map<std::string, std::map<std::string, Known>> sets;
  // set -> elements an add of which failed or failed over: that add may
  // have left a dot on a replica nobody read since (cut off, down), which
  // can surface at any later time, after later acknowledged adds and
  // removes too (a remove removes only the dots its context names). Such
  // an element is never checked for absence again.
  std::map<std::string, std::set<std::string>> may_return;
};

// Checks (Catch2 CHECKs) a read of `set` against the model: every element
// known present is there, every element known absent (and not in
// may_return) is not.
void CheckKnown(const std::string& set, const std::vector<ElementDots>& read,
                const KnownModel& model);

// Options of a simulated cluster of `nodes` on a rendezvous ring of
// `ring_size` partitions, N = `n`, epoch 1, whose transfers (hand-off,
// anti-entropy, the service's answers) go in chunks of `chunk_elements`:
// small chunks make a transfer long enough for faults to hit it midway.
SimOptions ChunkedClusterOptions(uint64_t seed, int nodes, uint32_t ring_size,
                                 int n, size_t chunk_elements);

// A 3-node cluster, N = 2 on a rendezvous ring of 8 partitions, whose
// transfers go in chunks of 3 elements, one at a time, so that faults hit
// them in the middle. `late`: messages now and then seconds late and
// duplicated, ties shuffled (old chunks, acknowledgements and notices
// arrive after what replaced them). REQUIREs that it starts.
std::unique_ptr<Simulator> SmallMovingCluster(uint64_t seed, bool sync_writes,
                                              bool late);

// The sets a KnownWriter writes to: "a" to "h".
const std::vector<std::string>& WriterSets();

// Random adds (three in four) and removes of elements "x0".."x40" in the
// WriterSets, each through a random running node with quorum `w`, kept in
// `model`: an acknowledged add makes the element present, an acknowledged
// remove (its context read with R = 2) absent, a failed one unknown (a
// failed add leaves a present element present). Not thread-safe; the
// simulator and model must outlive it.
class KnownWriter {
 public:
  KnownWriter(Simulator* sim, KnownModel* model, uint64_t seed, int w);

  // One operation, run to its end.
  void Op();
  // A random running node (REQUIREs one).
  NodeId Up();

 private:
  Simulator* sim_;
  KnownModel* model_;
  Rng rng_;
  int w_;
};

// Runs `sim` step by step until pred() holds, at most `max_micros` of
// virtual time (rounds never stop, so running until idle could run for
// ever). Returns whether pred() holds.
bool StepUntil(Simulator& sim, uint64_t max_micros,
               const std::function<bool()>& pred);

// No more loss, duplicates, corruption or stalls from now on.
void QuietNetwork(Simulator& sim);

// Heals every partition, quiets the network and restarts every node that
// is down (its clock set back, as after a reboot).
void HealAndRestartAll(Simulator& sim);

// CHECKs what an R = N read (with read repair; the rest of its options
// from `base`) of each of `sets` through the ring's first node returns
// against `model` (REQUIREs that it reads).
void CheckReadsKnown(Simulator& sim, const std::vector<std::string>& sets,
                     const KnownModel& model,
                     const ClusterReadOptions& base = {});

// Calls `on_accept` when `taker` sends `giver` its acceptance of the place
// in partition `p` (an ok HandoffDoneAck), before that message is routed;
// replaces the simulator's send observer.
void OnAcceptance(Simulator& sim, NodeId taker, NodeId giver, uint32_t p,
                  std::function<void()> on_accept);

// CHECKs each replica of each of `sets` (the ones the ring places) against
// `model`, read directly (no read repair), with the counts checked too.
void CheckReplicasKnown(Simulator& sim, const std::vector<std::string>& sets,
                        const KnownModel& model);

// CHECKs that every node's serving lists are the ring's, that each replica
// the ring places on it verifies, and that it holds nothing (no replica, no
// key) of the partitions the ring places elsewhere.
void CheckPlacedAsRingSays(Simulator& sim);

// A message sent, as the simulator's trace shows it.
struct TracedMessage {
  uint64_t time = 0;
  NodeId from = 0;
  NodeId to = 0;
  std::string type;
  uint64_t id = 0;
  uint32_t partition = 0;
};
// The messages in the trace's tail, oldest first (other lines skipped).
std::vector<TracedMessage> TracedMessages(const Simulator& sim);
// The trace's last `lines` lines, as UNSCOPED_INFO (shown with the next
// failure).
void DumpTrace(const Simulator& sim, size_t lines);

// Empty when every running node has the simulator's latest ring with no
// partition moving, no transfer pending or running and no release under
// way; otherwise, per node, what is still under way and which serving
// lists differ from the ring.
std::string Unsettled(Simulator& sim);
inline bool Settled(Simulator& sim) { return Unsettled(sim).empty(); }
// Runs `sim` in steps of 100 ms until it is settled, at most `bound` of
// virtual time; returns Settled(sim).
bool SettleWithin(Simulator& sim, uint64_t bound);
// SettleWithin, REQUIRing it settled (what is not, in the failure).
void SettleOrFail(Simulator& sim, uint64_t bound = 600'000'000);

}  // namespace bigset::testing

#endif  // BIGSET_TESTS_HANDOFF_UTIL_H_
