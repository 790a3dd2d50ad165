// The dispatcher: every message type to its one handler, hot messages
// without a Message, bulk streams into one reused message.

#include "cluster/dispatcher.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "net/message.h"

namespace bigset {
namespace {

std::string Encoded(MessageType type, uint64_t id) {
  Message m;
  m.header = MessageHeader{type, id, 3};
  return m.Encode();
}

// Registers a handler for every type, counting the calls per type.
void RegisterAll(Dispatcher* d, std::vector<int>* calls) {
  for (size_t t = 1; t <= kMaxMessageType; ++t) {
    const MessageType type = static_cast<MessageType>(t);
    if (type == MessageType::kReplicateAck) {
      d->OnRaw(type, [calls](NodeId, const MessageHeader& h, std::string_view) {
        ++(*calls)[static_cast<size_t>(h.type)];
        return true;
      });
    } else {
      d->On(
          type,
          [calls](NodeId, Message& m) {
            ++(*calls)[static_cast<size_t>(m.type())];
          },
          type == MessageType::kAePush);
    }
  }
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
  std::vector<const Message*> seen;
  std::vector<std::string> sets;
  Message inner;
  inner.header = MessageHeader{MessageType::kAePush, 2, 3};
  inner.set = "inner";
  Message outer;
  outer.header = MessageHeader{MessageType::kAePush, 1, 3};
  outer.set = "outer";
  outer.elements.push_back(ElementDots{"e", {Dot{1, 1}}});
  const std::string inner_bytes = inner.Encode();
  d.On(
      MessageType::kAePush,
      [&](NodeId, Message& m) {
        seen.push_back(&m);
        if (m.set == "outer") REQUIRE(d.Dispatch(7, inner_bytes));
        // The outer message is intact after the nested dispatch.
        sets.push_back(m.set);
      },
      /*bulk=*/true);
  REQUIRE(d.Dispatch(7, outer.Encode()));
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] != seen[1]);
  CHECK(sets == std::vector<std::string>{"inner", "outer"});
  // The next bulk message reuses the first one's storage.
  REQUIRE(d.Dispatch(7, outer.Encode()));
  CHECK(seen[2] == seen[0]);
}

}  // namespace
}  // namespace bigset
