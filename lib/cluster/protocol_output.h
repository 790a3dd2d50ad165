// ProtocolOutput: what a protocol that keeps its own timers (the hand-off,
// anti-entropy) asks of the node that drives it after an input: messages to
// send and timers to arm, in the order the protocol made them. Internal header.
//
// The protocol does no I/O while it runs; the driver carries out the
// effects in order once the input returns: a send goes to the transport, a
// timer calls the protocol's OnTimer(timer, now) after `delay_micros`
// (unless the node is gone by then). The order matters beyond the wire: a
// simulator draws a message's fate and a timer's jitter from one generator,
// so the same effects in another order make another history.

#ifndef BIGSET_LIB_CLUSTER_PROTOCOL_OUTPUT_H_
#define BIGSET_LIB_CLUSTER_PROTOCOL_OUTPUT_H_

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bigset/net/transport.h"

namespace bigset {

struct [[nodiscard]] ProtocolOutput {
  struct Effect {
    // A timer: `timer` after `delay_micros`. Else a send: `bytes` to `to`.
    bool is_timer = false;
    NodeId to = 0;
    std::string bytes;
    uint32_t timer = 0;
    uint64_t delay_micros = 0;
  };
  std::vector<Effect> effects;  // In order.

  void Send(NodeId to, std::string bytes) {
    effects.push_back(Effect{false, to, std::move(bytes), 0, 0});
  }
  void Arm(uint32_t timer, uint64_t delay_micros) {
    effects.push_back(Effect{true, 0, {}, timer, delay_micros});
  }
  bool empty() const { return effects.empty(); }
};

// An input's result beside its output.
template <typename T>
struct [[nodiscard]] WithOutput {
  T value;
  ProtocolOutput output;
};

// Runs one input of a protocol that keeps the input's time in `*now_slot`
// and gathers its effects in `*out`: returns the effects (and the input's
// result, if any). An input may run within another (a callback into the
// node that enters the protocol again): the inner one returns the effects
// gathered so far, the outer one's first, so the driver carries them in the
// order they were made.
template <typename F>
auto RunProtocolInput(uint64_t* now_slot, ProtocolOutput* out, uint64_t now,
                      F&& input) {
  const uint64_t outer = std::exchange(*now_slot, now);
  if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
    input();
    *now_slot = outer;
    return std::exchange(*out, {});
  } else {
    auto value = input();
    *now_slot = outer;
    return WithOutput<decltype(value)>{std::move(value),
                                       std::exchange(*out, {})};
  }
}

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_PROTOCOL_OUTPUT_H_
