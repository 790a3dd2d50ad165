// Clusters over real TCP on the loopback interface: node 1 runs in this
// process (a NodeRunner, which the benchmark drives), the other nodes are
// node_process processes (tests/network), all with mutual TLS unless the
// name says plaintext.
//
// BM_TcpClusterInsert/n:3/w:2: inserts per second through node 1 of a
// 3-process cluster, with up to 64 writes in flight; compared with
// BM_ClusterInsert/n:3/w:2 (the simulator, one insert at a time, every node
// on this thread). .../plaintext: the same without TLS.
// BM_TcpClusterInsertLatency/n:3/w:2: one insert at a time; counters p50_us
// and p99_us.
// BM_TcpHandOff/1000000: a 1,000,000-element set handed from node 1 (this
// process) to node 2 (another process), until node 1 let go of it;
// compared with BM_HandOffCeiling/rawleveldb/1000000 (real time).

#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench_util.h"
#include "bigset/network/node_runner.h"

namespace bigset::bench {
namespace {

// A port free now on 127.0.0.1 (bound to 0, then released).
uint16_t FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::abort();
  }
  close(fd);
  return ntohs(a.sin_port);
}

// A node_process child: its stdin and stdout as pipes.
class Child {
 public:
  Child(const std::vector<std::string>& args) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) std::abort();
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      std::vector<char*> argv;
      for (const std::string& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    in_ = fdopen(in[1], "w");
    out_ = fdopen(out[0], "r");
    const std::string ready = Line();
    if (ready.rfind("ready", 0) != 0) {
      std::fprintf(stderr, "node_process did not start: %s\n", ready.c_str());
      std::abort();
    }
  }
  ~Child() {
    std::fputs("quit\n", in_);
    std::fflush(in_);
    int status = 0;
    for (int i = 0; i < 300 && waitpid(pid_, &status, WNOHANG) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    std::fclose(in_);
    std::fclose(out_);
  }
  std::string Command(const std::string& line) {
    std::fputs((line + "\n").c_str(), in_);
    std::fflush(in_);
    return Line();
  }

 private:
  std::string Line() {
    char buf[4096];
    if (std::fgets(buf, sizeof(buf), out_) == nullptr) return "";
    std::string s(buf);
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  pid_t pid_ = 0;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

struct TcpCluster {
  // Nodes 1..count, ring of `ring_nodes` (node 1's is given, the others
  // start with it too), n replicas, ring size `size`.
  TcpCluster(int count, bool tls, std::vector<NodeId> ring_nodes, int n,
             uint32_t size) {
    std::filesystem::create_directories(dir.path());
    const std::string certs = dir.str() + "/certs";
    if (tls) {
      std::string cmd = absl::StrCat("bash ", BIGSET_MAKE_CERTS, " ", certs);
      for (int i = 1; i <= count; ++i) absl::StrAppend(&cmd, " ", i);
      if (std::system(cmd.c_str()) != 0) std::abort();
    }
    std::vector<uint16_t> ports(count + 1);
    for (int i = 2; i <= count; ++i) ports[i] = FreePort();
    auto book = std::make_shared<AddressBook>();
    for (int i = 2; i <= count; ++i) {
      book->Set(i, PeerAddress{"127.0.0.1", ports[i]});
    }
    RingOptions ro;
    ro.ring_size = size;
    ro.n = n;
    ro.epoch = 1;
    ro.placement = Placement::kRendezvous;
    auto ring = Ring::Create(ring_nodes, ro);
    if (!ring.ok()) std::abort();
    NodeRunnerOptions o;
    o.id = 1;
    o.data_dir = dir.str() + "/node-1";
    o.ring = *ring;
    o.addresses = book;
    o.transport.plaintext = !tls;
    if (tls) {
      o.transport.tls_ca_file = certs + "/ca.pem";
      o.transport.tls_cert_file = certs + "/node-1.pem";
      o.transport.tls_key_file = certs + "/node-1.key";
    }
    auto runner = NodeRunner::Start(std::move(o));
    if (!runner.ok()) {
      std::fprintf(stderr, "%s\n", runner.status().ToString().c_str());
      std::abort();
    }
    node = std::move(*runner);
    ports[1] = node->port();
    std::string ring_text;
    for (NodeId r : ring_nodes) {
      absl::StrAppend(&ring_text, ring_text.empty() ? "" : ",", r);
    }
    for (int i = 2; i <= count; ++i) {
      std::vector<std::string> args = {BIGSET_NODE_PROCESS,
                                       "--id",
                                       std::to_string(i),
                                       "--data",
                                       absl::StrCat(dir.str(), "/node-", i),
                                       "--listen",
                                       absl::StrCat("127.0.0.1:", ports[i]),
                                       "--ring",
                                       ring_text,
                                       "--n",
                                       std::to_string(n),
                                       "--ring-size",
                                       std::to_string(size)};
      for (int j = 1; j <= count; ++j) {
        if (j == i) continue;
        args.push_back("--peer");
        args.push_back(absl::StrCat(j, "=127.0.0.1:", ports[j]));
      }
      if (tls) {
        args.push_back("--tls-dir");
        args.push_back(certs);
      } else {
        args.push_back("--plaintext");
      }
      children.push_back(std::make_unique<Child>(args));
    }
  }
  ~TcpCluster() {
    (void)node->Close();
    children.clear();
  }
  BenchDir dir;
  std::unique_ptr<NodeRunner> node;
  std::vector<std::unique_ptr<Child>> children;
};

void TcpClusterInsert(benchmark::State& state, bool tls) {
  static TcpCluster* clusters[2] = {nullptr, nullptr};
  TcpCluster*& c = clusters[tls ? 1 : 0];
  if (c == nullptr) c = new TcpCluster(3, tls, {1, 2, 3}, 3, 16);
  std::mt19937_64 rng(NextRunSeed());
  ClusterWriteOptions wo;
  wo.w = 2;
  std::mutex mu;
  std::condition_variable cv;
  int inflight = 0;
  int64_t failed = 0;
  for (auto _ : state) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&]() { return inflight < 64; });
      ++inflight;
    }
    c->node->Update(kSet, {UpdateOp::Add(RandomElement(rng))}, wo,
                    [&](absl::StatusOr<Delta> d) {
                      std::lock_guard<std::mutex> lock(mu);
                      --inflight;
                      if (!d.ok()) ++failed;
                      cv.notify_one();
                    });
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&]() { return inflight == 0; });
  if (failed > 0) state.SkipWithError("writes failed");
  state.SetItemsProcessed(state.iterations());
}

void TcpClusterInsertLatency(benchmark::State& state) {
  static TcpCluster* c = new TcpCluster(3, true, {1, 2, 3}, 3, 16);
  std::mt19937_64 rng(NextRunSeed());
  ClusterWriteOptions wo;
  wo.w = 2;
  std::vector<double> micros;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    auto d =
        c->node->UpdateAndWait(kSet, {UpdateOp::Add(RandomElement(rng))}, wo);
    micros.push_back(std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - start)
                         .count());
    if (!d.ok()) state.SkipWithError("write failed");
  }
  std::sort(micros.begin(), micros.end());
  if (!micros.empty()) {
    state.counters["p50_us"] = micros[micros.size() / 2];
    state.counters["p99_us"] = micros[micros.size() * 99 / 100];
  }
  state.SetItemsProcessed(state.iterations());
}

void TcpHandOff(benchmark::State& state, uint64_t kSize) {
  uint64_t moved = 0;
  for (auto _ : state) {
    state.PauseTiming();
    // Node 1 holds the only replica of the only partition; node 2, another
    // process, is not in the ring yet.
    auto c =
        std::make_unique<TcpCluster>(2, true, std::vector<NodeId>{1}, 1, 1);
    Check(c->node->RunOnNode([&](Node& node) {
      Replica* r = node.LocalReplica(0);
      std::mt19937_64 rng(7);
      std::vector<UpdateOp> ops;
      for (uint64_t i = 0; i < kSize; ++i) {
        ops.push_back(UpdateOp::Add(RandomElement(rng)));
        if (ops.size() == 10'000) {
          Check(r->Update(kSet, ops).status());
          ops.clear();
        }
      }
    }));
    // Compacted, as in BM_HandOff: the sender's compactions of the load
    // would otherwise run during the hand-off.
    Check(c->node->CompactPartition(0));
    RingOptions ro;
    ro.ring_size = 1;
    ro.n = 1;
    ro.epoch = 2;
    ro.placement = Placement::kRendezvous;
    auto next = Ring::Create({2}, ro);
    if (!next.ok()) std::abort();
    state.ResumeTiming();
    if (c->children[0]->Command("install 2 2") != "ok") std::abort();
    Check(c->node->InstallRing(*next));
    while (true) {
      auto s = c->node->Stats();
      if (!s.ok()) std::abort();
      if (Counter(*s, "handoff.partitions_moving") == 0 &&
          Counter(*s, "handoff.done") > 0) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    state.PauseTiming();
    moved += kSize;
    c.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(moved));
}

[[maybe_unused]] const int kNetworkRegistered = [] {
  benchmark::RegisterBenchmark(
      "BM_TcpClusterInsert/n:3/w:2",
      [](benchmark::State& s) { TcpClusterInsert(s, true); })
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark(
      "BM_TcpClusterInsert/n:3/w:2/plaintext",
      [](benchmark::State& s) { TcpClusterInsert(s, false); })
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_TcpClusterInsertLatency/n:3/w:2",
                               TcpClusterInsertLatency)
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_TcpHandOff/1000000", TcpHandOff, 1'000'000)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->Iterations(1);
  benchmark::RegisterBenchmark("BM_TcpHandOff/1000", TcpHandOff, 1'000)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->Iterations(1);
  return 0;
}();

}  // namespace
}  // namespace bigset::bench
