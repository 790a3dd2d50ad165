// One node of a cluster in its own process, over TcpTransport, driven by a
// line protocol on standard input (one reply line per command on standard
// output), for the tests that run clusters of real processes
// (network_test.py) and the network benchmarks.
//
//   node_process --id 1 --data DIR --listen 127.0.0.1:0
//                --peer 2=127.0.0.1:7002 ... --ring 1,2,3 [--epoch 1]
//                [--ring-size 16] [--n 3] (--tls-dir DIR | --plaintext)
//                [--peer-queue-kib K] [--max-pending-handshakes N]
//
// At start it prints "ready <port>". Commands (elements and set names are
// words without spaces):
//   add SET ELEMENT [W]          -> ok | err MESSAGE
//   remove SET ELEMENT [W] [R]   (context from an R-quorum query)
//   contains SET ELEMENT [R]     -> ok 0|1
//   read SET [R]                 -> ok ELEMENT... (sorted)
//   local SET                    -> ok ELEMENT... (this node's replica only)
//   install EPOCH NODE...        (a new ring of those nodes)
//   peer NODE HOST:PORT          (address book)
//   stats                        -> ok name=value ...
//   moving                       -> ok [partition: why it still moves]...
//   quit                         (closes the node cleanly, exits 0)
// SIGTERM and SIGINT close the node cleanly too.

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bigset/network/node_runner.h"

namespace bigset::testing {
namespace {

// A node counter by name; 0 for a name the node does not have (the test
// reading this output then fails on the value).
uint64_t Get(const NodeStats& stats, std::string_view name) {
  uint64_t v = 0;
  stats.Get(name, &v);
  return v;
}

std::atomic<bool> g_stop{false};

// Whether AddressSanitizer is in: its quarantine and shadow memory make a
// process's resident size say little about what the node holds.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

absl::StatusOr<Ring> MakeRing(const std::vector<NodeId>& nodes, uint64_t epoch,
                              uint32_t size, int n) {
  RingOptions ro;
  ro.ring_size = size;
  ro.n = n;
  ro.epoch = epoch;
  ro.placement = Placement::kRendezvous;
  return Ring::Create(nodes, ro);
}

std::string Err(const absl::Status& s) {
  std::string m(s.ToString());
  std::replace(m.begin(), m.end(), '\n', ' ');
  return "err " + m;
}

int Main(int argc, char** argv) {
  CLI::App app{"One bigset node over TCP, driven on standard input"};
  uint32_t id = 0;
  std::string data, listen = "127.0.0.1:0", tls_dir, ring_text;
  std::vector<std::string> peers;
  uint64_t epoch = 1, ae_ms = 1000, gossip_ms = 500, queue_kib = 0;
  size_t max_pending = 0;
  uint32_t ring_size = 16;
  int n = 3;
  bool plaintext = false, sync = false;
  app.add_option("--id", id)->required();
  app.add_option("--data", data)->required();
  app.add_option("--listen", listen);
  app.add_option("--peer", peers, "NODE=HOST:PORT");
  app.add_option("--ring", ring_text, "the ring's nodes, 1,2,3")->required();
  app.add_option("--epoch", epoch);
  app.add_option("--ring-size", ring_size);
  app.add_option("--n", n);
  app.add_option("--tls-dir", tls_dir);
  app.add_flag("--plaintext", plaintext);
  app.add_flag("--sync-writes", sync);
  app.add_option("--ae-interval-ms", ae_ms);
  app.add_option("--max-pending-handshakes", max_pending,
                 "inbound connections in their handshakes at once");
  app.add_option("--peer-queue-kib", queue_kib,
                 "each peer's send queue bound (default: the transport's)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::vector<NodeId> ring_nodes;
  for (absl::string_view part : absl::StrSplit(ring_text, ',')) {
    uint32_t node = 0;
    if (!absl::SimpleAtoi(part, &node)) {
      std::cerr << "bad --ring\n";
      return 2;
    }
    ring_nodes.push_back(node);
  }
  absl::StatusOr<Ring> ring = MakeRing(ring_nodes, epoch, ring_size, n);
  absl::StatusOr<PeerAddress> self = ParsePeerAddress(listen);
  if (!ring.ok() || !self.ok()) {
    std::cerr << (ring.ok() ? self.status() : ring.status()) << "\n";
    return 2;
  }
  auto book = std::make_shared<AddressBook>();
  for (const std::string& p : peers) {
    std::pair<std::string, std::string> kv = absl::StrSplit(p, '=');
    uint32_t node = 0;
    absl::StatusOr<PeerAddress> address = ParsePeerAddress(kv.second);
    if (!absl::SimpleAtoi(kv.first, &node) || !address.ok()) {
      std::cerr << "bad --peer " << p << "\n";
      return 2;
    }
    book->Set(node, *address);
  }
  NodeRunnerOptions o;
  o.id = id;
  o.data_dir = data;
  o.ring = *ring;
  o.addresses = book;
  o.node.replica.sync_writes = sync;
  o.node.anti_entropy.interval_micros = ae_ms * 1000;
  o.node.handoff.gossip_micros = gossip_ms * 1000;
  o.transport.listen_host = self->host;
  o.transport.listen_port = self->port;
  o.transport.plaintext = plaintext;
  if (queue_kib != 0) o.transport.peer_queue_bytes = queue_kib << 10;
  if (max_pending != 0) o.transport.max_pending_handshakes = max_pending;
  if (!tls_dir.empty()) {
    o.transport.tls_ca_file = tls_dir + "/ca.pem";
    o.transport.tls_cert_file = absl::StrCat(tls_dir, "/node-", id, ".pem");
    o.transport.tls_key_file = absl::StrCat(tls_dir, "/node-", id, ".key");
  }
  o.transport.log = [id](std::string_view line) {
    std::cerr << "[node " << id << "] " << line << std::endl;
  };
  absl::StatusOr<std::unique_ptr<NodeRunner>> started =
      NodeRunner::Start(std::move(o));
  if (!started.ok()) {
    std::cerr << "cannot start: " << started.status() << "\n";
    return 1;
  }
  NodeRunner& runner = **started;
  // Without SA_RESTART: the signal interrupts the read of standard input,
  // and the loop ends with a clean close.
  struct sigaction sa = {};
  sa.sa_handler = [](int) { g_stop = true; };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::cout << "ready " << runner.port() << std::endl;
  std::string line;
  while (!g_stop && std::getline(std::cin, line)) {
    std::vector<std::string> w = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (w.empty()) continue;
    auto num = [&](size_t i, int def) {
      int v = def;
      if (i < w.size()) (void)absl::SimpleAtoi(w[i], &v);
      return v;
    };
    std::string out;
    const std::string& cmd = w[0];
    if (cmd == "quit") break;
    if (cmd == "add" && w.size() >= 3) {
      ClusterWriteOptions wo;
      wo.w = num(3, 2);
      absl::StatusOr<Delta> d =
          runner.UpdateAndWait(w[1], {UpdateOp::Add(w[2])}, wo);
      out = d.ok() ? "ok" : Err(d.status());
    } else if (cmd == "remove" && w.size() >= 3) {
      ClusterWriteOptions wo;
      wo.w = num(3, 2);
      ClusterReadOptions ro;
      ro.r = num(4, 2);
      absl::StatusOr<Membership> m =
          runner.ContainsAllAndWait(w[1], {w[2]}, ro);
      if (!m.ok()) {
        out = Err(m.status());
      } else {
        std::vector<Dot> ctx;
        for (const ElementDots& e : m->elements) {
          ctx.insert(ctx.end(), e.dots.begin(), e.dots.end());
        }
        absl::StatusOr<Delta> d =
            runner.UpdateAndWait(w[1], {UpdateOp::Remove(w[2], ctx)}, wo);
        out = d.ok() ? "ok" : Err(d.status());
      }
    } else if (cmd == "contains" && w.size() >= 3) {
      ClusterReadOptions ro;
      ro.r = num(3, 2);
      absl::StatusOr<Membership> m =
          runner.ContainsAllAndWait(w[1], {w[2]}, ro);
      out = m.ok() ? absl::StrCat("ok ", m->all_present ? 1 : 0)
                   : Err(m.status());
    } else if (cmd == "read" && w.size() >= 2) {
      ClusterReadOptions ro;
      ro.r = num(2, 2);
      absl::StatusOr<NodeRunner::ReadResult> r = runner.ReadAndWait(w[1], ro);
      if (!r.ok()) {
        out = Err(r.status());
      } else {
        out = "ok";
        for (const ElementDots& e : r->elements)
          absl::StrAppend(&out, " ", e.element);
      }
    } else if (cmd == "local" && w.size() >= 2) {
      std::vector<std::string> found;
      const std::string set = w[1];
      absl::Status s = runner.RunOnNode([&](Node& node) {
        Replica* r = node.LocalReplica(node.ring().PartitionOf(set));
        if (r == nullptr) return;
        absl::StatusOr<std::unique_ptr<SetReader>> reader = r->Read(set, {});
        if (!reader.ok()) return;
        std::vector<ElementDots> chunk;
        while (true) {
          absl::StatusOr<bool> more = (*reader)->Next(&chunk);
          if (!more.ok() || !*more) break;
          for (const ElementDots& e : chunk) found.push_back(e.element);
        }
      });
      out = s.ok() ? absl::StrCat("ok ", absl::StrJoin(found, " ")) : Err(s);
    } else if (cmd == "install" && w.size() >= 3) {
      std::vector<NodeId> nodes;
      for (size_t i = 2; i < w.size(); ++i) nodes.push_back(num(i, 0));
      absl::StatusOr<Ring> next =
          MakeRing(nodes, static_cast<uint64_t>(num(1, 0)), ring_size, n);
      absl::Status s = next.ok() ? runner.InstallRing(*next) : next.status();
      out = s.ok() ? "ok" : Err(s);
    } else if (cmd == "peer" && w.size() >= 3) {
      absl::StatusOr<PeerAddress> a = ParsePeerAddress(w[2]);
      if (a.ok()) book->Set(static_cast<NodeId>(num(1, 0)), *a);
      out = a.ok() ? "ok" : Err(a.status());
    } else if (cmd == "moving") {
      absl::StatusOr<std::vector<PartitionMove>> moving = runner.Moving();
      if (!moving.ok()) {
        out = Err(moving.status());
      } else {
        out = "ok";
        for (const PartitionMove& m : *moving) {
          absl::StrAppend(&out, " [p", m.partition, " serving ",
                          absl::StrJoin(m.serving, ","), " target ",
                          absl::StrJoin(m.target, ","), ": ", m.state, " peer ",
                          m.peer, " for ", m.since_micros / 1000, " ms]");
        }
      }
    } else if (cmd == "stats") {
      absl::StatusOr<NodeStats> s = runner.Stats();
      const TransportStats t = runner.TransportStatistics();
      if (!s.ok()) {
        out = Err(s.status());
      } else {
        out = absl::StrCat(
            "ok ring_epoch=", Get(*s, "handoff.ring_epoch"),
            " partitions_moving=", Get(*s, "handoff.partitions_moving"),
            " handoffs_running=", Get(*s, "handoff.running"),
            " handoffs_pending=", Get(*s, "handoff.pending"),
            " handoffs_done=", Get(*s, "handoff.done"),
            " partitions_releasing=", Get(*s, "handoff.partitions_releasing"),
            " ae_rounds=", Get(*s, "anti_entropy.rounds"),
            " ae_sets_repaired=", Get(*s, "anti_entropy.sets_repaired"),
            " malformed_messages=", Get(*s, "node.malformed_messages"),
            " frames_too_large=", t.frames_too_large,
            " bad_frames=", t.bad_frames,
            " handshakes_refused=", t.handshakes_refused,
            " tls_failures=", t.tls_failures,
            " handshake_timeouts=", t.handshake_timeouts,
            " connections_accepted=", t.connections_accepted,
            " connections_refused=", t.connections_refused);
        uint64_t in = 0, out_frames = 0, dropped = 0, queued = 0;
        for (const PeerStats& p : t.peers) {
          in += p.frames_in;
          out_frames += p.frames_out;
          dropped += p.dropped_queue_full;
          queued = std::max(queued, p.queued_bytes);
        }
        absl::StrAppend(&out, " frames_in=", in, " frames_out=", out_frames,
                        " dropped_queue_full=", dropped,
                        " max_queued_bytes=", queued,
                        " sanitized=", kSanitized ? 1 : 0);
      }
    } else {
      out = "err unknown command";
    }
    std::cout << out << std::endl;
  }
  absl::Status s = runner.Close();
  if (!s.ok()) {
    std::cerr << "close: " << s << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace bigset::testing

int main(int argc, char** argv) { return bigset::testing::Main(argc, argv); }
