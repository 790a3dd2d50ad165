// AsioScheduler: the production Scheduler, on an Asio io_context's steady
// timers.
//
// NowMicros is the steady (monotonic) clock: it never goes back while the
// process runs, and starts again from an unrelated value when the machine
// reboots (the protocols never compare times across restarts).
//
// Thread-safety: After and Cancel are called on the thread that runs the
// io_context, and timers fire there; REQUIRES that exactly one thread runs
// it. NowMicros may be called from any thread.

#ifndef BIGSET_NETWORK_ASIO_SCHEDULER_H_
#define BIGSET_NETWORK_ASIO_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "bigset/export.h"
#include "bigset/net/transport.h"

namespace asio {
class io_context;
}  // namespace asio

namespace bigset {

class BIGSET_EXPORT AsioScheduler final : public Scheduler {
 public:
  // REQUIRES: `io` outlives the scheduler.
  explicit AsioScheduler(asio::io_context* io);
  ~AsioScheduler() override;
  AsioScheduler(const AsioScheduler&) = delete;
  AsioScheduler& operator=(const AsioScheduler&) = delete;

  uint64_t NowMicros() const override;
  TimerId After(uint64_t delay_micros, std::function<void()> fn) override;
  void Cancel(TimerId id) override;
  // Cancels every timer (their callbacks never run).
  void CancelAll();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bigset

#endif  // BIGSET_NETWORK_ASIO_SCHEDULER_H_
