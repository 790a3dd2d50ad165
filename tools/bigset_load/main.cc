// bigset-load: a Basho-Bench-like load generator for Bigset and its
// baselines (docs/REPORT.md draws on it).
//
//   bigset-load --target local|resp|onevalue|onevalue-delta
//               [--dir DIR] [--address HOST:PORT] [--password P]
//               [--server-pid PID] [--workers W] [--duration-s S | --ops N]
//               [--sets K] [--keys sequential|uniform|pareto]
//               [--mix add:60,contains:40] [--preload N] [--element-bytes B]
//               [--range-limit L] [--interval-ms MS] [--csv FILE]
//
// Every interval it writes one CSV line: elapsed seconds, operations, ops
// per second, mean, p95, p99 and max latency (microseconds), errors, adds
// so far (with --sets 1 and only adds: the set's cardinality), and the
// resident memory of what serves the sets. The last line ("total") covers
// the whole run.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "histogram.h"
#include "target.h"

namespace bigset::load {
namespace {

enum class Op { kAdd, kRemove, kContains, kRange, kRead, kCount };
constexpr int kOps = 6;

struct Config {
  std::string target = "local";
  std::string dir;
  std::string address = "127.0.0.1:6379";
  std::string password;
  int server_pid = 0;
  int workers = 1;
  double duration_s = 10;
  uint64_t ops = 0;
  uint64_t sets = 1;
  std::string keys = "uniform";
  std::string mix = "add:100";
  uint64_t preload = 0;
  int element_bytes = 4;
  uint64_t range_limit = 100;
  int interval_ms = 1000;
  int replicas = 3;
  bool sync_writes = false;
  std::string csv;
  std::string set_prefix = "set";
  uint64_t known_elements = 0;
};

struct Mix {
  double weight[kOps] = {};
  double total = 0;
};

bool ParseMix(const std::string& text, Mix* mix) {
  static const char* kNames[kOps] = {"add",   "remove", "contains",
                                     "range", "read",   "count"};
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::pair<std::string, std::string> kv = absl::StrSplit(part, ':');
    double w = 0;
    if (!absl::SimpleAtod(kv.second, &w) || w < 0) return false;
    int found = -1;
    for (int i = 0; i < kOps; ++i) {
      if (kv.first == kNames[i]) found = i;
    }
    if (found < 0) return false;
    mix->weight[found] += w;
    mix->total += w;
  }
  return mix->total > 0;
}

// Elements: `bytes` big-endian bytes of a counter (the paper's 4-byte
// elements), so that sequential adds are new and in order.
std::string Element(uint64_t n, int bytes) {
  std::string e(static_cast<size_t>(bytes), '\0');
  for (int i = bytes - 1; i >= 0; --i) {
    e[static_cast<size_t>(i)] = static_cast<char>(n & 0xff);
    n >>= 8;
  }
  return e;
}

struct WorkerStats {
  std::mutex mu;
  Histogram h;
  uint64_t errors = 0;
  std::string last_error;
};

class Run {
 public:
  Run(const Config& c, const Mix& mix, Target* target)
      : c_(c),
        mix_(mix),
        target_(target),
        stats_(static_cast<size_t>(c.workers)) {
    for (auto& s : stats_) s = std::make_unique<WorkerStats>();
    next_element_.resize(c.sets);
    for (auto& n : next_element_) {
      n = std::make_unique<std::atomic<uint64_t>>(c.known_elements);
    }
  }

  std::string SetName(uint64_t i) const {
    return absl::StrCat(c_.set_prefix, i);
  }

  absl::Status Preload() {
    if (c_.preload == 0) return absl::OkStatus();
    absl::StatusOr<std::unique_ptr<TargetSession>> s = target_->Connect();
    if (!s.ok()) return s.status();
    constexpr uint64_t kChunk = 100'000;
    for (uint64_t set = 0; set < c_.sets; ++set) {
      for (uint64_t done = 0; done < c_.preload; done += kChunk) {
        std::vector<std::string> elements;
        for (uint64_t i = done; i < std::min(c_.preload, done + kChunk); ++i) {
          elements.push_back(
              Element(next_element_[set]->fetch_add(1), c_.element_bytes));
        }
        if (absl::Status st = (*s)->Preload(SetName(set), elements); !st.ok()) {
          return st;
        }
      }
    }
    return absl::OkStatus();
  }

  uint64_t PickSet(std::mt19937_64& rng, uint64_t i) const {
    if (c_.sets == 1) return 0;
    if (c_.keys == "sequential") return i % c_.sets;
    std::uniform_real_distribution<double> u(0, 1);
    if (c_.keys == "pareto") {
      // 80% of the requests go to the first 20% of the sets:
      // index = K * u^a with a = ln 0.2 / ln 0.8.
      const double a = std::log(0.2) / std::log(0.8);
      return std::min<uint64_t>(
          c_.sets - 1, static_cast<uint64_t>(c_.sets * std::pow(u(rng), a)));
    }
    return std::uniform_int_distribution<uint64_t>(0, c_.sets - 1)(rng);
  }

  Op PickOp(std::mt19937_64& rng) const {
    double x = std::uniform_real_distribution<double>(0, mix_.total)(rng);
    for (int i = 0; i < kOps; ++i) {
      if (x < mix_.weight[i]) return static_cast<Op>(i);
      x -= mix_.weight[i];
    }
    return Op::kAdd;
  }

  void Worker(int w) {
    WorkerLoop(w);
    const int64_t now =
        std::chrono::steady_clock::now().time_since_epoch().count();
    int64_t seen = last_end_.load();
    while (seen < now && !last_end_.compare_exchange_weak(seen, now)) {
    }
    done_workers_.fetch_add(1);
  }

  void WorkerLoop(int w) {
    std::mt19937_64 rng(0x5eed + static_cast<uint64_t>(w));
    absl::StatusOr<std::unique_ptr<TargetSession>> session = target_->Connect();
    WorkerStats& stats = *stats_[static_cast<size_t>(w)];
    if (!session.ok()) {
      std::lock_guard<std::mutex> lock(stats.mu);
      ++stats.errors;
      stats.last_error = session.status().ToString();
      return;
    }
    TargetSession& s = **session;
    for (uint64_t i = 0; !stop_.load(std::memory_order_relaxed); ++i) {
      if (c_.ops != 0 && issued_.fetch_add(1) >= c_.ops) break;
      const uint64_t set = PickSet(rng, i);
      const std::string name = SetName(set);
      const Op op = PickOp(rng);
      auto existing = [&]() {
        const uint64_t n = next_element_[set]->load(std::memory_order_relaxed);
        return Element(
            n == 0 ? 0 : std::uniform_int_distribution<uint64_t>(0, n - 1)(rng),
            c_.element_bytes);
      };
      const auto start = std::chrono::steady_clock::now();
      absl::Status st;
      switch (op) {
        case Op::kAdd:
          st = s.Add(name, Element(next_element_[set]->fetch_add(1),
                                   c_.element_bytes));
          adds_.fetch_add(1, std::memory_order_relaxed);
          break;
        case Op::kRemove:
          st = s.Remove(name, existing());
          break;
        case Op::kContains:
          st = s.Contains(name, existing()).status();
          break;
        case Op::kRange:
          st = s.Range(name, existing(), c_.range_limit).status();
          break;
        case Op::kRead:
          st = s.FullRead(name).status();
          break;
        case Op::kCount:
          st = s.Count(name).status();
          break;
      }
      const uint64_t nanos = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              std::chrono::steady_clock::now() - start)
              .count());
      std::lock_guard<std::mutex> lock(stats.mu);
      stats.h.Record(nanos);
      if (!st.ok()) {
        ++stats.errors;
        stats.last_error = st.ToString();
      }
    }
  }

  int Go(FILE* out) {
    std::fprintf(out,
                 "elapsed_s,ops,ops_per_s,mean_us,p95_us,p99_us,max_us,errors,"
                 "adds,rss_bytes\n");
    std::fflush(out);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int w = 0; w < c_.workers; ++w)
      threads.emplace_back([this, w] { Worker(w); });
    Histogram total;
    uint64_t total_errors = 0;
    std::string last_error;
    auto last = t0;
    bool done = false;
    while (!done) {
      // Wake often, so that a run that ends between two reports ends then.
      const auto due = last + std::chrono::milliseconds(c_.interval_ms);
      while (std::chrono::steady_clock::now() < due && !Finished(t0)) {
        std::this_thread::sleep_for(
            std::chrono::milliseconds(std::min(c_.interval_ms, 5)));
      }
      if (Finished(t0)) {
        stop_ = true;
        for (auto& t : threads) t.join();
        threads.clear();
        done = true;
      }
      const auto now = std::chrono::steady_clock::now();
      const double elapsed = std::chrono::duration<double>(now - t0).count();
      Histogram interval;
      uint64_t errors = 0;
      for (auto& s : stats_) {
        std::lock_guard<std::mutex> lock(s->mu);
        interval.Merge(s->h);
        s->h.Reset();
        errors += s->errors;
        s->errors = 0;
        if (!s->last_error.empty()) last_error = s->last_error;
      }
      const double span = std::chrono::duration<double>(now - last).count();
      last = now;
      Line(out, absl::StrFormat("%.3f", elapsed), interval, errors, span);
      total.Merge(interval);
      total_errors += errors;
    }
    // The whole run: until the last operation ended.
    const double all =
        std::chrono::duration<double>(
            std::chrono::steady_clock::time_point(
                std::chrono::steady_clock::duration(last_end_.load())) -
            t0)
            .count();
    Line(out, "total", total, total_errors, all);
    if (!last_error.empty()) std::cerr << "last error: " << last_error << "\n";
    return total.count() == 0 ? 1 : 0;
  }

  bool Finished(std::chrono::steady_clock::time_point t0) const {
    if (c_.ops != 0) return done_workers_.load() == c_.workers;
    return std::chrono::steady_clock::now() - t0 >=
               std::chrono::duration<double>(c_.duration_s) ||
           done_workers_.load() == c_.workers;
  }

  void Line(FILE* out, const std::string& when, const Histogram& h,
            uint64_t errors, double seconds) {
    std::fprintf(
        out, "%s,%llu,%.1f,%.2f,%.2f,%.2f,%.2f,%llu,%llu,%llu\n", when.c_str(),
        static_cast<unsigned long long>(h.count()),
        seconds > 0 ? static_cast<double>(h.count()) / seconds : 0.0,
        h.Mean() / 1000.0, static_cast<double>(h.Percentile(0.95)) / 1000.0,
        static_cast<double>(h.Percentile(0.99)) / 1000.0,
        static_cast<double>(h.max()) / 1000.0,
        static_cast<unsigned long long>(errors),
        static_cast<unsigned long long>(adds_.load() + c_.preload * c_.sets),
        static_cast<unsigned long long>(target_->ServerRssBytes()));
    std::fflush(out);
  }

 private:
  const Config& c_;
  const Mix& mix_;
  Target* target_;
  std::vector<std::unique_ptr<WorkerStats>> stats_;
  std::vector<std::unique_ptr<std::atomic<uint64_t>>> next_element_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> issued_{0};
  std::atomic<uint64_t> adds_{0};
  std::atomic<int> done_workers_{0};
  // When the last operation ended (steady_clock ticks).
  std::atomic<int64_t> last_end_{0};
};

int Main(int argc, char** argv) {
  CLI::App app{
      "bigset-load: drive Bigset (in process or over RESP) and its baselines"};
  Config c;
  app.add_option("--target", c.target,
                 "local, resp, onevalue or onevalue-delta")
      ->check(CLI::IsMember({"local", "resp", "onevalue", "onevalue-delta"}));
  app.add_option("--dir", c.dir,
                 "data directory of in-process targets (default: a "
                 "temporary one, removed at the end)");
  app.add_option("--address", c.address, "resp: HOST:PORT");
  app.add_option("--password", c.password, "resp: AUTH password");
  app.add_option("--server-pid", c.server_pid,
                 "resp: the server's pid, for its memory");
  app.add_option("--workers", c.workers, "worker threads (connections)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--duration-s", c.duration_s, "how long (default 10)");
  app.add_option("--ops", c.ops, "stop after this many operations instead");
  app.add_option("--sets", c.sets, "number of sets (keys)")
      ->check(CLI::Range(1, 100000000));
  app.add_option("--keys", c.keys,
                 "set choice: sequential, uniform or pareto (80/20)")
      ->check(CLI::IsMember({"sequential", "uniform", "pareto"}));
  app.add_option("--mix", c.mix,
                 "weights of add, remove, contains, range, read, count (e.g. "
                 "add:60,read:40)");
  app.add_option("--preload", c.preload,
                 "elements added to every set first (untimed)");
  app.add_option("--element-bytes", c.element_bytes, "element size")
      ->check(CLI::Range(1, 8));
  app.add_option("--range-limit", c.range_limit, "elements per range page");
  app.add_option("--interval-ms", c.interval_ms, "report interval")
      ->check(CLI::Range(10, 3600000));
  app.add_option("--replicas", c.replicas, "onevalue targets: replicas")
      ->check(CLI::Range(1, 9));
  app.add_flag("--sync-writes", c.sync_writes, "local: fsync every write");
  app.add_option("--csv", c.csv,
                 "write the CSV here (default: standard output)");
  app.add_option("--set-prefix", c.set_prefix,
                 "set names are PREFIX0, PREFIX1, ... (default \"set\")");
  app.add_option("--known-elements", c.known_elements,
                 "every set already holds elements 0..N-1 (an earlier run's "
                 "--preload into the same sets): reads choose among them");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  Mix mix;
  if (!ParseMix(c.mix, &mix)) {
    std::cerr << "bigset-load: bad --mix '" << c.mix << "'\n";
    return 2;
  }
  bool temporary = false;
  if (c.dir.empty() && c.target != "resp") {
    char tmpl[] = "/tmp/bigset-load-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::cerr << "bigset-load: cannot make a temporary directory\n";
      return 1;
    }
    c.dir = tmpl;
    temporary = true;
  }
  absl::StatusOr<std::unique_ptr<Target>> target =
      c.target == "local" ? NewLocalTarget(c.dir, c.sync_writes)
      : c.target == "resp"
          ? NewRespTarget(c.address, c.password, c.server_pid)
          : NewOneValueTarget(c.dir, c.replicas, c.target == "onevalue-delta");
  if (!target.ok()) {
    std::cerr << "bigset-load: " << target.status() << "\n";
    return 1;
  }
  FILE* out = stdout;
  if (!c.csv.empty()) {
    out = std::fopen(c.csv.c_str(), "w");
    if (out == nullptr) {
      std::cerr << "bigset-load: cannot write " << c.csv << "\n";
      return 1;
    }
  }
  int rc = 0;
  {
    Run run(c, mix, target->get());
    if (absl::Status s = run.Preload(); !s.ok()) {
      std::cerr << "bigset-load: preload: " << s << "\n";
      rc = 1;
    } else {
      rc = run.Go(out);
    }
  }
  target->reset();
  if (out != stdout) std::fclose(out);
  if (temporary) std::filesystem::remove_all(c.dir);
  return rc;
}

}  // namespace
}  // namespace bigset::load

int main(int argc, char** argv) { return bigset::load::Main(argc, argv); }
