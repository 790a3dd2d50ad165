// TcpTransport's send queue towards a peer that stops reading (frozen,
// busy): what it holds back, and what reaches the peer first when it
// reads again. Two transports in one process on loopback, each on its
// own io_context; "frozen" is the receiver's io_context not being run.

#include <asio.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bigset/network/address_book.h"
#include "bigset/network/tcp_transport.h"
#include "net/message_type.h"
#include "network/framing.h"

namespace bigset {
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

}  // namespace
}  // namespace bigset
