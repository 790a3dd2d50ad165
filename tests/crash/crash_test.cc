// Crash safety: a writer process runs random updates, clears and bounded
// sweeps on a replica and is killed with SIGKILL at random points, several
// times in a row. After each kill: Verify finds nothing wrong, every
// acknowledged update is there, the value is that after exactly the
// acknowledged updates or after one more (the one in flight, applied
// atomically or not at all), and no counter is ever reused; every other
// round, a sweep resumes whatever the writer left half done and leaves
// every tombstone empty.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bigset/keys/keys.h"
#include "bigset/replica/replica.h"
#include "bigset/store/leveldb_store.h"
#include "crash_workload.h"
#include "replica/replica_internal.h"
#include "test_util.h"

namespace bigset::testing {
namespace {

struct Writer {
  pid_t pid = -1;
  int out = -1;  // Read end of the writer's stdout.
};

Writer Spawn(const std::string& path, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  return Writer{pid, fds[0]};
}

// Reads exactly n bytes unless EOF comes first; returns the bytes read.
std::string ReadUpTo(int fd, size_t n) {
  std::string buf(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, buf.data() + got, n - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  buf.resize(got);
  return buf;
}

// Reads one acknowledged delta; false at EOF or on a partial message.
bool ReadAck(int fd, Delta* out) {
  std::string len_bytes = ReadUpTo(fd, 4);
  if (len_bytes.size() < 4) return false;
  uint32_t len;
  std::memcpy(&len, len_bytes.data(), 4);
  std::string body = ReadUpTo(fd, len);
  if (body.size() < len) return false;
  auto d = Delta::Decode(body);
  REQUIRE(d.ok());
  *out = std::move(*d);
  return true;
}

CrashValues ReadValues(Replica& r) {
  CrashValues values;
  for (const std::string& set : CrashSets()) {
    auto reader = r.Read(set);
    REQUIRE(reader.ok());
    std::vector<ElementDots> chunk;
    while (true) {
      auto more = (*reader)->Next(&chunk);
      REQUIRE(more.ok());
      if (!*more) break;
      for (auto& e : chunk) {
        values[set][e.element].insert(e.dots.begin(), e.dots.end());
      }
    }
  }
  return values;
}

// The actor id the writer used (metadata of keyspace 0).
ActorId WriterActor(Store& store) {
  std::string value;
  REQUIRE(store.Get(ReadOptions(), MetadataKey(0, "actor"), &value).ok());
  REQUIRE(value.size() == 9);
  ActorId actor = 0;
  for (int i = 1; i < 9; ++i) {
    actor = (actor << 8) | static_cast<uint8_t>(value[i]);
  }
  return actor;
}

TEST_CASE("crash: SIGKILL at random points loses nothing acknowledged") {
  const char* writer_path = std::getenv("BIGSET_CRASH_WRITER");
  REQUIRE(writer_path != nullptr);
  for (uint64_t seed : Seeds(2)) {
    CAPTURE(seed);
    Rng rng(seed);
    std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                ("bigset_crash_" + std::to_string(::getpid()) +
                                 "_" + std::to_string(seed));
    std::filesystem::remove_all(dir);

    CrashValues values;  // As recovered after the previous round.
    std::set<std::pair<std::string, Dot>> used;  // Every dot ever committed.
    // Per (set, actor): the largest counter committed. A writer killed
    // without a clean shutdown comes back with a new actor (an epoch), so a
    // set's events span several actors; each actor's counters go up by one
    // and are never reused.
    std::map<std::pair<std::string, ActorId>, uint64_t> max_counter;
    uint64_t total_acked = 0;
    uint64_t total_clears = 0;
    uint64_t swept_entries = 0;
    int in_flight_committed = 0;
    int kills = 0;
    int half_swept = 0;
    for (int round = 0; round < 10; ++round) {
      CAPTURE(round);
      const bool sync = round % 2 == 0;
      Writer w = Spawn(writer_path, {dir.string(), std::to_string(seed),
                                     std::to_string(round), sync ? "1" : "0"});
      // Let it acknowledge a random number of updates, then kill it at a
      // random moment.
      uint64_t target = Uniform(rng, 0, 300);
      std::vector<Delta> acked;
      Delta d;
      while (acked.size() < target && ReadAck(w.out, &d)) acked.push_back(d);
      ::usleep(static_cast<useconds_t>(Uniform(rng, 0, 3000)));
      ::kill(w.pid, SIGKILL);
      int status = 0;
      REQUIRE(::waitpid(w.pid, &status, 0) == w.pid);
      // Acknowledgements already in the pipe count; a partial one does not.
      while (ReadAck(w.out, &d)) acked.push_back(d);
      ::close(w.out);
      INFO("writer status " << status);
      REQUIRE(WIFSIGNALED(status));
      REQUIRE(WTERMSIG(status) == SIGKILL);
      total_acked += acked.size();

      // The values after the acknowledged updates, which must be what the
      // workload asked for.
      CrashValues after_acked = values;
      for (size_t i = 0; i < acked.size(); ++i) {
        CrashUpdate u =
            NextCrashUpdate(seed, round, static_cast<int>(i), after_acked);
        REQUIRE(acked[i].set == u.set);
        REQUIRE(acked[i].ops.size() == u.ops.size());
        if (acked[i].clear.has_value()) REQUIRE(u.clear);
        for (const DeltaOp& op : acked[i].ops) {
          if (!op.add.has_value()) continue;
          // Never reused, and the next counter of this set and actor.
          REQUIRE(used.insert({acked[i].set, *op.add}).second);
          uint64_t& max = max_counter[{acked[i].set, op.add->actor}];
          REQUIRE(op.add->counter == max + 1);
          max = op.add->counter;
        }
        if (acked[i].clear.has_value()) ++total_clears;
        ApplyToValues(acked[i], &after_acked);
      }

      auto store = LevelDbStore::Open(dir.string(), LevelDbStoreOptions());
      REQUIRE(store.ok());
      // The killed writer's actor, before opening the replica (which may
      // start a new epoch).
      const ActorId writer = WriterActor(**store);
      for (const std::string& set : CrashSets()) {
        std::string unused;
        if ((*store)
                ->Get(
                    ReadOptions(),
                    MetadataKey(
                        0, std::string(replica_internal::kSweepSnapshot) + set),
                    &unused)
                .ok()) {
          ++half_swept;  // Killed with this set's sweep half done.
        }
      }
      auto replica = Replica::Open(store->get(), ReplicaOptions());
      REQUIRE(replica.ok());
      auto report = (*replica)->Verify();
      REQUIRE(report.ok());
      INFO((report->problems.empty() ? std::string() : report->problems[0]));
      REQUIRE(report->ok());

      // The update in flight at the kill, as the writer would have made it.
      CrashUpdate next = NextCrashUpdate(
          seed, round, static_cast<int>(acked.size()), after_acked);
      Delta in_flight;
      in_flight.set = next.set;
      if (next.clear) {
        // The set's whole clock: every dot present.
        auto clock = (*replica)->GetClock(next.set);
        REQUIRE(clock.ok());
        in_flight.clear = *clock;
      }
      std::vector<Dot> new_dots;
      uint64_t counter = max_counter[{next.set, writer}];
      for (const UpdateOp& op : next.ops) {
        DeltaOp& dop = in_flight.ops.emplace_back();
        dop.element = op.element;
        dop.context = op.context;
        if (op.kind == UpdateOp::Kind::kAdd) {
          dop.add = Dot{writer, ++counter};
          new_dots.push_back(*dop.add);
        }
      }
      CrashValues after_in_flight = after_acked;
      ApplyToValues(in_flight, &after_in_flight);

      CrashValues recovered = ReadValues(**replica);
      bool is_acked = recovered == after_acked;
      bool is_in_flight = recovered == after_in_flight;
      REQUIRE((is_acked || is_in_flight));
      if (is_in_flight && !is_acked) {
        ++in_flight_committed;
        for (Dot dot : new_dots) {
          REQUIRE(used.insert({next.set, dot}).second);
        }
        max_counter[{next.set, writer}] = counter;
      }
      // Counts survived the kill with the sets (Verify checked the stored
      // ones; this checks what Count answers).
      for (const std::string& set : CrashSets()) {
        auto count = (*replica)->Count(set);
        REQUIRE(count.ok());
        auto it = recovered.find(set);
        REQUIRE(*count == (it == recovered.end() ? 0 : it->second.size()));
      }
      // The set-clocks never lost an event.
      for (const std::string& set : CrashSets()) {
        auto clock = (*replica)->GetClock(set);
        REQUIRE(clock.ok());
        for (const auto& [s, dot] : used) {
          if (s == set) REQUIRE(clock->Seen(dot));
        }
        for (const auto& [key, max] : max_counter) {
          if (key.first == set) REQUIRE(clock->MaxCounter(key.second) == max);
        }
      }
      if (round % 2 == 1) {
        // The next sweep resumes what the killed writer left (from its
        // cursor) and finishes every queued set.
        uint64_t entries = 0;
        for (int i = 0;; ++i) {
          REQUIRE(i < 100);
          auto p = (*replica)->SweepSome(UINT64_MAX);
          REQUIRE(p.ok());
          entries += p->entries_done;
          if (p->idle) break;
        }
        swept_entries += entries;
        for (const std::string& set : CrashSets()) {
          auto st = (*replica)->GetSetStats(set);
          REQUIRE(st.ok());
          REQUIRE(st->tombstone_dots == 0);
        }
        REQUIRE((*replica)->stats().sweep_queue_length == 0);
        REQUIRE(ReadValues(**replica) == recovered);
        auto swept_report = (*replica)->Verify();
        REQUIRE(swept_report.ok());
        REQUIRE(swept_report->ok());
      }
      values = std::move(recovered);
      ++kills;
    }
    std::printf(
        "crash seed %llu: %d kills, %llu acknowledged updates (%llu clears), "
        "%d unacknowledged updates found committed, %d sweeps found half "
        "done, %llu sets swept after a kill\n",
        static_cast<unsigned long long>(seed), kills,
        static_cast<unsigned long long>(total_acked),
        static_cast<unsigned long long>(total_clears), in_flight_committed,
        half_swept, static_cast<unsigned long long>(swept_entries));
    // The test did exercise the writer, its clears and sweeps.
    CHECK(total_acked > 0);
    CHECK(total_clears > 0);
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace bigset::testing
