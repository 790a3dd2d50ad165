// TcpTransport's send queue towards a peer that stops reading (frozen,
// busy): what it holds back, and what reaches the peer first when it
// reads again. Two transports in one process on loopback, each on its
// own io_context; "frozen" is the receiver's io_context not being run.

#include <asio.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bigset/network/address_book.h"
#include "bigset/network/tcp_transport.h"
#include "net/message_type.h"
#include "network/framing.h"

namespace bigset::testing {
namespace {

constexpr NodeId kSender = 1;
constexpr NodeId kReceiver = 2;
constexpr size_t kRequestBytes = 4096;
constexpr int kRequests = 3000;  // About 12 MiB.

// A message the transport takes for a request (a replicated delta) or an
// answer (an acknowledgement): it reads only the first two bytes.
std::string Message(MessageType type, int n, size_t size) {
  std::string m(size, 'x');
  m[0] = static_cast<char>(kMessageFormatVersion);
  m[1] = static_cast<char>(type);
  const std::string tag = std::to_string(n) + ":";
  m.replace(2, tag.size(), tag);
  return m;
}

int Number(std::string_view m) {
  int n = 0;
  for (size_t i = 2; i < m.size() && m[i] != ':'; ++i) n = n * 10 + m[i] - '0';
  return n;
}

// net.ipv4.tcp_rmem's default (a socket's receive buffer before it grows).
size_t DefaultReceiveBuffer() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_rmem");
  size_t low = 0, standard = 0;
  if (!(in >> low >> standard)) return 128 << 10;
  return standard;
}

struct Received {
  std::vector<int> requests;       // In arrival order.
  size_t request_bytes_first = 0;  // Request bytes before the answer.
  bool answered = false;
};

struct Pair {
  explicit Pair(size_t unsent_bytes) {
    TcpTransportOptions o;
    o.plaintext = true;
    o.unsent_bytes = unsent_bytes;
    book = std::make_shared<AddressBook>();
    sender = std::make_unique<TcpTransport>(&io_sender, kSender, book, o);
    receiver = std::make_unique<TcpTransport>(&io_receiver, kReceiver, book, o);
    REQUIRE(sender->Start([](NodeId, std::string_view) {}).ok());
    REQUIRE(receiver
                ->Start([this](NodeId, std::string_view m) {
                  if (static_cast<uint8_t>(m[1]) ==
                      static_cast<uint8_t>(MessageType::kReplicateAck)) {
                    received.answered = true;
                    return;
                  }
                  received.requests.push_back(Number(m));
                  if (!received.answered) {
                    received.request_bytes_first += m.size();
                  }
                })
                .ok());
    book->Set(kSender, PeerAddress{"127.0.0.1", sender->port()});
    book->Set(kReceiver, PeerAddress{"127.0.0.1", receiver->port()});
  }
  ~Pair() {
    sender->Stop();
    receiver->Stop();
    io_sender.poll();
    io_receiver.poll();
  }

  // Runs the sender (and the receiver unless frozen) for `ms`, or until
  // `done` holds.
  template <typename Done>
  bool Run(int ms, bool frozen, Done done) {
    const auto end =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      io_sender.poll();
      if (!frozen) io_receiver.poll();
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return done();
  }

  PeerStats SenderStats() const {
    for (const PeerStats& p : sender->Stats().peers) {
      if (p.node == kReceiver) return p;
    }
    return PeerStats{};
  }

  asio::io_context io_sender;
  asio::io_context io_receiver;
  std::shared_ptr<AddressBook> book;
  std::unique_ptr<TcpTransport> sender;
  std::unique_ptr<TcpTransport> receiver;
  Received received;
};

// Connects, freezes the receiver, queues kRequests requests, sends them
// all again (retransmissions), then one answer; wakes the receiver.
// Returns the duplicates the sender dropped.
uint64_t FreezeAndWake(Pair& p) {
  p.sender->Send(kSender, kReceiver,
                 Message(MessageType::kReplicate, 0, kRequestBytes));
  REQUIRE(p.Run(5000, false, [&] { return p.received.requests.size() == 1; }));
  p.received = Received{};
  for (int i = 1; i <= kRequests; ++i) {
    p.sender->Send(kSender, kReceiver,
                   Message(MessageType::kReplicate, i, kRequestBytes));
  }
  // The kernel takes what it will; the rest waits in the queue.
  p.Run(500, true, [] { return false; });
  const uint64_t queued_before = p.SenderStats().queued_bytes;
  for (int i = 1; i <= kRequests; ++i) {
    p.sender->Send(kSender, kReceiver,
                   Message(MessageType::kReplicate, i, kRequestBytes));
  }
  const PeerStats after = p.SenderStats();
  const uint64_t frame = kRequestBytes + framing::kHeaderBytes;
  // Every copy sent again is either dropped as a duplicate or queued.
  const uint64_t queued_again = (after.queued_bytes - queued_before) / frame;
  INFO("queued before " << queued_before << ", after " << after.queued_bytes
                        << ", duplicates dropped " << after.dropped_duplicates);
  CHECK(after.dropped_duplicates + queued_again ==
        static_cast<uint64_t>(kRequests));
  p.sender->Send(kSender, kReceiver,
                 Message(MessageType::kReplicateAck, 0, 64));
  p.Run(200, true, [] { return false; });
  // Awake: everything arrives, the answer among the first.
  REQUIRE(p.Run(20000, false, [&] {
    return p.received.answered &&
           std::set<int>(p.received.requests.begin(), p.received.requests.end())
                   .size() == static_cast<size_t>(kRequests);
  }));
  return after.dropped_duplicates;
}

TEST_CASE(
    "tcp transport: a woken peer reads its answers after at most the kernel's "
    "receive buffer and unsent_bytes of requests") {
  Pair p(64 << 10);
  const uint64_t dropped = FreezeAndWake(p);
  // Most of the 12 MiB waited in the queue, so most copies were dropped.
  CHECK(dropped > kRequests / 2);
  INFO("request bytes ahead of the answer: " << p.received.request_bytes_first);
  // The receiver's buffer (its default size: it did not read, so it did
  // not grow; counted twice for the kernel's overhead) plus the sender's
  // unsent bound and one write: 768 KiB with Linux's defaults. Without the
  // bound the sender's kernel held 1-5 MB unsent here.
  const size_t bound = 2 * DefaultReceiveBuffer() + (512 << 10);
  INFO("bound " << bound);
  CHECK(p.received.request_bytes_first < bound);
  WARN("unsent_bytes 64 KiB: " << p.received.request_bytes_first
                               << " request bytes ahead of the answer, "
                               << dropped << " duplicates dropped");
}

TEST_CASE(
    "tcp transport: without an unsent bound every request still arrives once "
    "woken") {
  Pair p(0);
  const uint64_t dropped = FreezeAndWake(p);
  WARN("unsent_bytes 0: " << p.received.request_bytes_first
                          << " request bytes ahead of the answer, " << dropped
                          << " duplicates dropped");
}

TEST_CASE("tcp transport: a peer that keeps up is sent every retransmission") {
  Pair p(64 << 10);
  p.sender->Send(kSender, kReceiver,
                 Message(MessageType::kReplicate, 0, kRequestBytes));
  REQUIRE(p.Run(5000, false, [&] { return p.received.requests.size() == 1; }));
  // The same request again and again, each sent once the one before
  // arrived: nothing backs up, so nothing is fingerprinted or dropped.
  for (int round = 1; round <= 20; ++round) {
    p.sender->Send(kSender, kReceiver,
                   Message(MessageType::kReplicate, 0, kRequestBytes));
    REQUIRE(p.Run(5000, false, [&] {
      return p.received.requests.size() == static_cast<size_t>(round + 1);
    }));
  }
  CHECK(p.SenderStats().dropped_duplicates == 0);
}

// ---- Attacks on the unsent bound, the duplicate filter and the reconnect
// on a peer's handshake. Any number of transports, each on its own
// io_context, any of which may be frozen, stopped and started again on
// the same port.

struct Peer {
  Peer(NodeId id, std::shared_ptr<AddressBook> book, TcpTransportOptions o)
      : id(id), book(std::move(book)), options(std::move(o)) {}
  ~Peer() { Stop(); }

  void Start(uint16_t port = 0) {
    TcpTransportOptions o = options;
    o.plaintext = true;
    o.listen_port = port;
    t = std::make_unique<TcpTransport>(&io, id, book, o);
    REQUIRE(t->Start([this](NodeId from, std::string_view m) {
               ++got[std::string(m)];
               ++arrivals;
               last_from = from;
             }).ok());
    book->Set(id, PeerAddress{"127.0.0.1", t->port()});
  }
  void Stop() {
    if (t == nullptr) return;
    t->Stop();
    Poll();
    t.reset();
    Poll();
  }
  // A new transport on the same port (a restarted node).
  void Restart() {
    const uint16_t port = t->port();
    Stop();
    Start(port);
  }
  void Poll() {
    if (io.stopped()) io.restart();
    io.poll();
  }
  void Send(NodeId to, std::string m) { t->Send(id, to, std::move(m)); }
  PeerStats StatsOf(NodeId peer) const {
    for (const PeerStats& p : t->Stats().peers) {
      if (p.node == peer) return p;
    }
    return PeerStats{};
  }
  int Count(const std::string& m) const {
    auto it = got.find(m);
    return it == got.end() ? 0 : it->second;
  }

  const NodeId id;
  std::shared_ptr<AddressBook> book;
  TcpTransportOptions options;
  asio::io_context io;
  std::unique_ptr<TcpTransport> t;
  bool frozen = false;
  std::unordered_map<std::string, int> got;  // Each message: arrivals.
  uint64_t arrivals = 0;
  NodeId last_from = 0;
};

// Runs every peer that is not frozen for `ms`, or until `done` holds.
template <typename Done>
bool RunAll(std::vector<Peer*> peers, int ms, Done done) {
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    for (Peer* p : peers) {
      if (!p->frozen && p->t != nullptr) p->Poll();
    }
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return done();
}

TcpTransportOptions Plain() {
  TcpTransportOptions o;
  o.plaintext = true;
  return o;
}

// The messages of `want` that have not arrived at `p`.
size_t Missing(const Peer& p, const std::vector<std::string>& want) {
  size_t missing = 0;
  for (const std::string& m : want) missing += p.Count(m) == 0;
  return missing;
}

// Connects s to r: one request there and back.
void Connect(Peer& s, Peer& r) {
  const std::string hello = Message(MessageType::kReplicate, 999999, 64);
  s.Send(r.id, hello);
  REQUIRE(RunAll({&s, &r}, 4000, [&] { return r.Count(hello) > 0; }));
  r.got.clear();
  r.arrivals = 0;
}

// Starts both and connects s to r.
void StartAndConnect(Peer& s, Peer& r) {
  s.Start();
  r.Start();
  Connect(s, r);
}

void ResetConnectionWhileBacklogged(TcpTransportOptions o, bool restart) {
  auto book = std::make_shared<AddressBook>();
  Peer s(kSender, book, o), r(kReceiver, book, o);
  StartAndConnect(s, r);
  constexpr int kN = 1500;  // About 6 MiB.
  std::vector<std::string> want;
  for (int i = 1; i <= kN; ++i) {
    want.push_back(Message(MessageType::kReplicate, i, kRequestBytes));
  }
  r.frozen = true;
  for (const std::string& m : want) s.Send(r.id, m);
  // The kernel takes what it will; one write stays in flight.
  RunAll({&s, &r}, 300, [] { return false; });
  const PeerStats before = s.StatsOf(r.id);
  for (const std::string& m : want) s.Send(r.id, m);
  const PeerStats after = s.StatsOf(r.id);
  INFO("dropped as duplicates " << after.dropped_duplicates << ", queued "
                                << before.queued_bytes << " then "
                                << after.queued_bytes);
  // Most copies wait unsent; those handed to the kernel are queued again.
  CHECK(after.dropped_duplicates > 0);
  CHECK(after.dropped_duplicates < static_cast<uint64_t>(kN));
  CHECK(after.queued_bytes > before.queued_bytes);
  if (restart) {
    // What the stopped receiver's kernel held is lost with it.
    r.Restart();
    r.frozen = false;
  } else {
    // The write stalls past idle_timeout_micros: made again, still frozen
    // (its handshakes time out), then woken.
    RunAll({&s, &r}, 1500, [] { return false; });
    r.frozen = false;
  }
  const bool all =
      RunAll({&s, &r}, 4500, [&] { return Missing(r, want) == 0; });
  const PeerStats end = s.StatsOf(r.id);
  INFO("missing " << Missing(r, want) << " of " << kN << ", connects "
                  << end.connects << ", disconnects " << end.disconnects
                  << ", queued " << end.queued_bytes << ", last error '"
                  << end.last_error << "'");
  REQUIRE(all);
  CHECK(end.dropped_queue_full == 0);
  CHECK(end.disconnects >= 1);
  CHECK(end.connects >= 2);
}

TEST_CASE(
    "tcp transport: retransmissions of requests in the kernel when the "
    "receiver restarts all arrive") {
  ResetConnectionWhileBacklogged(Plain(), /*restart=*/true);
}

TEST_CASE(
    "tcp transport: retransmissions of requests in a stalled write all arrive "
    "after the stall reset") {
  TcpTransportOptions o = Plain();
  o.keepalive_micros = 100'000;
  o.idle_timeout_micros = 400'000;
  o.handshake_timeout_micros = 300'000;
  ResetConnectionWhileBacklogged(o, /*restart=*/false);
}

TEST_CASE(
    "tcp transport: answers among a backlog of requests all arrive, identical "
    "ones too") {
  auto book = std::make_shared<AddressBook>();
  Peer s(kSender, book, Plain()), r(kReceiver, book, Plain());
  StartAndConnect(s, r);
  r.frozen = true;
  constexpr int kN = 1500;
  std::vector<std::string> requests, answers;
  for (int i = 1; i <= kN; ++i) {
    requests.push_back(Message(MessageType::kReplicate, i, kRequestBytes));
    if (i % 10 == 0) {
      answers.push_back(Message(MessageType::kReplicateAck, i, 200));
    }
  }
  int sent_requests = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kN; ++i) {
      s.Send(r.id, requests[i]);
      ++sent_requests;
      // Each answer twice in each round, byte for byte the same.
      if ((i + 1) % 10 == 0) {
        s.Send(r.id, answers[i / 10]);
        s.Send(r.id, answers[i / 10]);
      }
    }
    RunAll({&s, &r}, 100, [] { return false; });
  }
  r.frozen = false;
  const PeerStats before = s.StatsOf(r.id);
  REQUIRE(RunAll({&s, &r}, 4500, [&] {
    return s.StatsOf(r.id).queued_bytes == 0 && Missing(r, requests) == 0 &&
           Missing(r, answers) == 0 &&
           r.arrivals + before.dropped_duplicates ==
               static_cast<uint64_t>(sent_requests) + 6 * answers.size();
  }));
  const PeerStats end = s.StatsOf(r.id);
  CHECK(end.dropped_queue_full == 0);
  CHECK(end.disconnects == 0);
  CHECK(end.dropped_duplicates > 0);
  for (const std::string& a : answers) {
    INFO("answer " << Number(a));
    CHECK(r.Count(a) == 6);
  }
  // Every send arrived or was counted: nothing else was lost.
  CHECK(r.arrivals + end.dropped_duplicates ==
        static_cast<uint64_t>(sent_requests) + 6 * answers.size());
}

// Distinct requests of random sizes (1 B to 200 KiB), in families that
// differ in their last byte only (or in one middle byte, or by a trailing
// byte), each sent three times into a backlog.
void DistinctRequests(uint64_t seed, size_t unsent_bytes, bool frozen) {
  INFO("seed " << seed << ", unsent_bytes " << unsent_bytes << ", frozen "
               << frozen);
  std::mt19937_64 rng(seed);
  std::vector<std::string> want;
  std::set<std::string> seen;
  size_t total = 0;
  while (total < (20u << 20)) {
    const size_t size =
        rng() % 4 == 0 ? 1 + rng() % 8 : 1 + rng() % (200 << 10);
    std::string base(size, '\0');
    for (char& c : base) c = static_cast<char>(rng());
    if (size >= 2) {
      base[0] = static_cast<char>(kMessageFormatVersion);
      base[1] = static_cast<char>(MessageType::kReplicate);
    }
    const int family = 1 + static_cast<int>(rng() % 16);
    std::set<std::string> members;
    for (int v = 0; v < family; ++v) {
      std::string m = base;
      if (v % 4 == 3) {
        m.push_back(static_cast<char>(v));  // One byte longer.
      } else if (v % 4 == 2 && size > 2) {
        m[2 + (size - 2) / 2] ^= static_cast<char>(v);  // A middle byte.
      } else if (size > 2 || size == 1) {
        m.back() = static_cast<char>(v);
      }
      members.insert(std::move(m));
    }
    for (const std::string& m : members) {
      if (!seen.insert(m).second) continue;  // Another family's.
      total += m.size();
      want.push_back(m);
    }
  }
  auto book = std::make_shared<AddressBook>();
  TcpTransportOptions o = Plain();
  o.unsent_bytes = unsent_bytes;
  Peer s(kSender, book, o), r(kReceiver, book, o);
  StartAndConnect(s, r);
  r.frozen = frozen;
  for (int round = 0; round < 3; ++round) {
    for (const std::string& m : want) s.Send(r.id, m);
    if (frozen) RunAll({&s, &r}, 50, [] { return false; });
  }
  r.frozen = false;
  const uint64_t sends = 3 * want.size();
  REQUIRE(RunAll({&s, &r}, 4500, [&] {
    return r.arrivals + s.StatsOf(r.id).dropped_duplicates == sends;
  }));
  const PeerStats end = s.StatsOf(r.id);
  INFO(want.size() << " distinct requests, " << total << " bytes, "
                   << end.dropped_duplicates << " duplicates dropped");
  CHECK(end.dropped_queue_full == 0);
  CHECK(end.disconnects == 0);
  CHECK(Missing(r, want) == 0);
  CHECK(r.got.size() == want.size());
  for (const std::string& m : want) {
    if (r.Count(m) == 0) {
      FAIL_CHECK("lost a request of " << m.size() << " bytes");
      break;
    }
  }
  if (frozen) CHECK(end.dropped_duplicates > 0);
}

TEST_CASE(
    "tcp transport: requests that differ in one byte are never taken for "
    "duplicates") {
  DistinctRequests(20261129, 64 << 10, /*frozen=*/true);
}

TEST_CASE(
    "tcp transport: unsent_bytes 1 (a 16 KiB write) delivers everything") {
  DistinctRequests(7, 1, /*frozen=*/true);
  DistinctRequests(8, 1, /*frozen=*/false);
}

TEST_CASE("tcp transport: unsent_bytes 1 GiB delivers everything") {
  DistinctRequests(9, size_t{1} << 30, /*frozen=*/true);
  DistinctRequests(10, size_t{1} << 30, /*frozen=*/false);
}

// The sender's connection to a stopped receiver waits out a back-off of
// at least kBackoffMicros / 2; a new receiver on the same port that
// makes itself heard (a request, or a dial) gets the sender's queue at
// once.
constexpr uint64_t kBackoffMicros = 8'000'000;

// Options whose reconnect back-off is always `micros`.
TcpTransportOptions FixedBackoff(uint64_t micros = kBackoffMicros) {
  TcpTransportOptions o = Plain();
  o.reconnect_min_micros = micros;
  o.reconnect_max_micros = micros;
  return o;
}

// Starts and connects both, then stops the receiver and waits until the
// sender saw its connection go (it now waits out a back-off). Returns the
// receiver's port, for a restart on it.
uint16_t ConnectThenStopReceiver(Peer& s, Peer& r) {
  StartAndConnect(s, r);
  const uint16_t port = r.t->port();
  r.Stop();
  REQUIRE(RunAll({&s}, 2000, [&] { return !s.StatsOf(r.id).connected; }));
  return port;
}

void HeardAgain(bool dial) {
  auto book = std::make_shared<AddressBook>();
  Peer s(kSender, book, FixedBackoff()), r(kReceiver, book, FixedBackoff());
  const uint16_t port = ConnectThenStopReceiver(s, r);
  const auto lost = std::chrono::steady_clock::now();
  std::vector<std::string> want;
  for (int i = 1; i <= 100; ++i) {
    want.push_back(Message(MessageType::kReplicate, i, 1000));
    s.Send(r.id, want.back());
  }
  RunAll({&s}, 100, [] { return false; });
  CHECK(s.StatsOf(r.id).connects == 1);
  r.Start(port);
  if (dial) {
    r.t->Dial(s.id);
  } else {
    r.Send(s.id, Message(MessageType::kReplicate, 5, 100));
  }
  // The back-off's timer fires kBackoffMicros / 2 after the loss at the
  // earliest: well before that, everything arrived over a new connection.
  const int budget_ms = static_cast<int>(kBackoffMicros / 2 / 1000) - 1500;
  const bool arrived =
      RunAll({&s, &r}, budget_ms, [&] { return Missing(r, want) == 0; });
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - lost)
                          .count();
  INFO("waited " << waited << " ms after the loss");
  CHECK(arrived);
  CHECK(waited < static_cast<int64_t>(kBackoffMicros / 2 / 1000));
  CHECK(s.StatsOf(r.id).connects == 2);
}

TEST_CASE(
    "tcp transport: a restarted peer's request ends the sender's back-off") {
  HeardAgain(/*dial=*/false);
}

TEST_CASE("tcp transport: a restarted peer's dial ends the sender's back-off") {
  HeardAgain(/*dial=*/true);
}

TEST_CASE(
    "tcp transport: a woken connection that failed does not keep the peer's "
    "next start from waking it",
    "[regression]") {
  // Seen in CI (network_restart_reconnect): the sender's early connection
  // to a peer that came up failed in its handshake (the peer was killed),
  // and the flag that bounds early connections stayed set, so the peer's
  // next start waited out the whole back-off.
  auto book = std::make_shared<AddressBook>();
  TcpTransportOptions logged = FixedBackoff();
  std::vector<std::string> log;
  logged.log = [&log](std::string_view line) { log.emplace_back(line); };
  Peer s(kSender, book, logged), r(kReceiver, book, FixedBackoff());
  const uint16_t port = ConnectThenStopReceiver(s, r);
  const std::string first = Message(MessageType::kReplicate, 1, 1000);
  s.Send(r.id, first);
  RunAll({&s}, 100, [] { return false; });
  // The receiver comes back just long enough for its handshake to wake
  // the sender, and is gone before the sender's connection completes.
  r.Start(port);
  r.Send(s.id, Message(MessageType::kReplicate, 2, 100));
  auto accepted = [&] {
    for (const std::string& line : log) {
      if (line.find("accepted node 2") != std::string::npos) return true;
    }
    return false;
  };
  log.clear();
  REQUIRE(RunAll({&r, &s}, 3000, accepted));
  r.Stop();
  RunAll({&s}, 1100, [] { return false; });  // Past kWakeEveryMicros.
  const uint64_t connects = s.StatsOf(r.id).connects;
  // Back for good: its handshake wakes the sender again.
  const auto back = std::chrono::steady_clock::now();
  r.Start(port);
  r.Send(s.id, Message(MessageType::kReplicate, 3, 100));
  const bool arrived =
      RunAll({&s, &r}, 2500, [&] { return r.Count(first) > 0; });
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - back)
                          .count();
  INFO("waited " << waited << " ms; sender's connects " << connects << " -> "
                 << s.StatsOf(r.id).connects);
  CHECK(arrived);
  CHECK(s.StatsOf(r.id).connects > connects);
}

TEST_CASE(
    "tcp transport: a peer that restarts ten times quickly is connected to a "
    "bounded number of times") {
  const TcpTransportOptions o = FixedBackoff(2'000'000);
  auto book = std::make_shared<AddressBook>();
  Peer s(kSender, book, o), r(kReceiver, book, o);
  StartAndConnect(s, r);
  std::string last;
  for (int i = 1; i <= 10; ++i) {
    r.Restart();
    r.Send(s.id, Message(MessageType::kReplicate, i, 100));
    // What an earlier receiver's kernel held is lost with it.
    last = Message(MessageType::kReplicate, i, 1000);
    s.Send(r.id, last);
    RunAll({&s, &r}, 30, [] { return false; });
  }
  // The last receiver hears the sender well before the back-off's end.
  REQUIRE(RunAll({&s, &r}, 900, [&] { return r.Count(last) > 0; }));
  RunAll({&s, &r}, 300, [] { return false; });
  const PeerStats end = s.StatsOf(r.id);
  INFO("connects " << end.connects << ", disconnects " << end.disconnects);
  // One for each receiver, at most (and the first).
  CHECK(end.connects <= 11);
  CHECK(end.connected);
}

TEST_CASE(
    "tcp transport: address books that send each node to the wrong one do not "
    "make a storm of connections") {
  // Node 1 finds node 3 where it looks for node 2, node 3 finds node 2 where
  // it looks for node 1, node 2 finds node 1 where it looks for node 3:
  // every connection is refused by its maker after the other end accepted
  // its handshake.
  const TcpTransportOptions o = FixedBackoff(1'000'000);
  auto book1 = std::make_shared<AddressBook>();
  auto book2 = std::make_shared<AddressBook>();
  auto book3 = std::make_shared<AddressBook>();
  Peer a(1, book1, o), b(2, book2, o), c(3, book3, o);
  a.Start();
  b.Start();
  c.Start();
  const PeerAddress at_a{"127.0.0.1", a.t->port()};
  const PeerAddress at_b{"127.0.0.1", b.t->port()};
  const PeerAddress at_c{"127.0.0.1", c.t->port()};
  book1->Set(2, at_c);
  book3->Set(1, at_b);
  book2->Set(3, at_a);
  a.Send(2, Message(MessageType::kReplicate, 1, 100));
  c.Send(1, Message(MessageType::kReplicate, 2, 100));
  b.Send(3, Message(MessageType::kReplicate, 3, 100));
  RunAll({&a, &b, &c}, 2500, [] { return false; });
  uint64_t accepted = 0;
  for (Peer* p : {&a, &b, &c}) accepted += p->t->Stats().connections_accepted;
  // Each node tries about once a second: three or four times in 2.5 s.
  INFO("connections accepted in 2.5 s: " << accepted);
  CHECK(accepted <= 30);
  CHECK(a.arrivals + b.arrivals + c.arrivals == 0);
}

}  // namespace
}  // namespace bigset::testing
