// The dispatcher: every message type to its one handler, hot messages
// without a message struct, bulk streams into one reused message.

#include "cluster/dispatcher.h"

#include <array>
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "net/message.h"

namespace bigset::testing {
namespace {

// Alternative I of MessageBody, default-constructed, as message bytes.
template <size_t I>
std::string EncodedAt(uint64_t id) {
  return EncodeMessage(id, 3, std::variant_alternative_t<I, MessageBody>());
}

std::string Encoded(MessageType type, uint64_t id) {
  using Fn = std::string (*)(uint64_t);
  static constexpr auto kTable = []<size_t... I>(std::index_sequence<I...>) {
    return std::array<Fn, sizeof...(I)>{&EncodedAt<I>...};
  }
  (std::make_index_sequence<std::variant_size_v<MessageBody>>());
  return kTable[static_cast<size_t>(type) - 1](id);
}

// Registers a typed handler for alternative I's type, counting its calls.
template <size_t I>
void RegisterTyped(Dispatcher* d, std::vector<int>* calls) {
  using Body = std::variant_alternative_t<I, MessageBody>;
  d->On<Body>(
      [calls](NodeId, const MessageHeader& h, Body&) {
        CHECK(h.type == Body::kType);
        ++(*calls)[static_cast<size_t>(Body::kType)];
      },
      Body::kType == MessageType::kAePush);
}

// Registers a handler for every type (kReplicateAck raw, the others
// typed), counting the calls per type.
void RegisterAll(Dispatcher* d, std::vector<int>* calls) {
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((std::variant_alternative_t<I, MessageBody>::kType ==
              MessageType::kReplicateAck
          ? void()
          : RegisterTyped<I>(d, calls)),
     ...);
  }
  (std::make_index_sequence<std::variant_size_v<MessageBody>>());
  d->OnRaw(MessageType::kReplicateAck,
           [calls](NodeId, const MessageHeader& h, std::string_view) {
             ++(*calls)[static_cast<size_t>(h.type)];
             return true;
           });
}

TEST_CASE("dispatcher: a type without a handler, or with two, is an error") {
  std::vector<int> calls(kMaxMessageType + 1);
  Dispatcher d;
  CHECK(d.CheckComplete().code() == absl::StatusCode::kInternal);
  RegisterAll(&d, &calls);
  CHECK(d.CheckComplete().ok());
  // A second, raw, handler for a decoded type.
  d.OnRaw(MessageType::kRead,
          [](NodeId, const MessageHeader&, std::string_view) { return true; });
  const absl::Status two = d.CheckComplete();
  CHECK(two.code() == absl::StatusCode::kInternal);
  CHECK(two.message().find("Read") != absl::string_view::npos);
}

TEST_CASE("dispatcher: each message reaches its type's handler once") {
  std::vector<int> calls(kMaxMessageType + 1);
  Dispatcher d;
  RegisterAll(&d, &calls);
  for (size_t t = 1; t <= kMaxMessageType; ++t) {
    CAPTURE(t);
    REQUIRE(d.Dispatch(7, Encoded(static_cast<MessageType>(t), t)));
    CHECK(calls[t] == 1);
  }
  // Undecodable bytes reach no handler.
  std::string bad = Encoded(MessageType::kRead, 1);
  bad[bad.size() / 2] ^= 0x10;
  CHECK_FALSE(d.Dispatch(7, bad));
  CHECK_FALSE(d.Dispatch(7, ""));
  CHECK_FALSE(d.Dispatch(7, std::string(3, '\0')));
  CHECK(calls[static_cast<size_t>(MessageType::kRead)] == 1);
  // A raw handler's verdict is the dispatch's.
  Dispatcher strict;
  strict.OnRaw(
      MessageType::kReplicateAck,
      [](NodeId, const MessageHeader&, std::string_view) { return false; });
  CHECK_FALSE(strict.Dispatch(7, Encoded(MessageType::kReplicateAck, 1)));
}

TEST_CASE("dispatcher: a bulk message nested in another is decoded afresh") {
  Dispatcher d;
  std::vector<const msg::AePush*> seen;
  std::vector<std::string> sets;
  msg::AePush inner;
  inner.set = "inner";
  msg::AePush outer;
  outer.set = "outer";
  outer.elements.push_back(ElementDots{"e", {Dot{1, 1}}});
  const std::string inner_bytes = EncodeMessage(2, 3, inner);
  const std::string outer_bytes = EncodeMessage(1, 3, outer);
  d.On<msg::AePush>(
      [&](NodeId, const MessageHeader&, msg::AePush& m) {
        seen.push_back(&m);
        if (m.set == "outer") REQUIRE(d.Dispatch(7, inner_bytes));
        // The outer message is intact after the nested dispatch.
        sets.push_back(m.set);
      },
      /*bulk=*/true);
  REQUIRE(d.Dispatch(7, outer_bytes));
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] != seen[1]);
  CHECK(sets == std::vector<std::string>{"inner", "outer"});
  // The next bulk message reuses the first one's storage.
  REQUIRE(d.Dispatch(7, outer_bytes));
  CHECK(seen[2] == seen[0]);
}

// A protocol whose handlers the dispatcher calls by member pointer.
struct Protocol {
  std::vector<std::string> log;
  void OnQuery(NodeId from, const MessageHeader& h, msg::Query& m) {
    log.push_back("query " + std::to_string(from) + " " +
                  std::to_string(h.request_id) + " " + m.set);
  }
  void OnCount(NodeId from, const MessageHeader& h, const msg::Count& m) {
    log.push_back("count " + std::to_string(from) + " " +
                  std::to_string(h.request_id) + " " + m.set);
  }
};

TEST_CASE(
    "dispatcher: a protocol's member handler gets the decoded message, "
    "whether it takes it const or not") {
  Dispatcher d;
  Protocol p;
  d.On(&p, &Protocol::OnQuery);
  d.On(&p, &Protocol::OnCount);
  REQUIRE(d.Dispatch(
      4, EncodeMessage(11, 3, msg::Query{.set = "s", .elements = {}})));
  REQUIRE(d.Dispatch(5, EncodeMessage(12, 3, msg::Count{.set = "t"})));
  CHECK(p.log == std::vector<std::string>{"query 4 11 s", "count 5 12 t"});
  // Garbage reaches neither.
  CHECK_FALSE(d.Dispatch(4, "\x01\x02"));
  CHECK(p.log.size() == 2);
}

}  // namespace
}  // namespace bigset::testing
