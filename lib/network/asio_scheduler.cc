#include "bigset/network/asio_scheduler.h"

#include <asio.hpp>
#include <chrono>
#include <map>
#include <utility>

namespace bigset {

class AsioScheduler::Impl {
 public:
  explicit Impl(asio::io_context* io) : io_(io) {}

  TimerId After(uint64_t delay_micros, std::function<void()> fn) {
    const TimerId id = next_id_++;
    auto timer = std::make_unique<asio::steady_timer>(
        *io_, std::chrono::microseconds(delay_micros));
    asio::steady_timer* raw = timer.get();
    timers_.emplace(id, std::move(timer));
    raw->async_wait([this, id, alive = std::weak_ptr<bool>(alive_),
                     fn = std::move(fn)](const asio::error_code& ec) {
      if (alive.expired()) return;  // The scheduler is gone.
      timers_.erase(id);
      if (!ec) fn();
    });
    return id;
  }

  void Cancel(TimerId id) {
    auto it = timers_.find(id);
    if (it == timers_.end()) return;
    it->second->cancel();  // Its handler runs with operation_aborted.
  }

  void CancelAll() {
    for (auto& [id, timer] : timers_) timer->cancel();
  }

  ~Impl() {
    alive_.reset();
    CancelAll();
  }

 private:
  asio::io_context* const io_;
  TimerId next_id_ = 1;
  std::map<TimerId, std::unique_ptr<asio::steady_timer>> timers_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

AsioScheduler::AsioScheduler(asio::io_context* io)
    : impl_(std::make_unique<Impl>(io)) {}
AsioScheduler::~AsioScheduler() = default;

uint64_t AsioScheduler::NowMicros() const {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

Scheduler::TimerId AsioScheduler::After(uint64_t delay_micros,
                                        std::function<void()> fn) {
  return impl_->After(delay_micros, std::move(fn));
}

void AsioScheduler::Cancel(TimerId id) { impl_->Cancel(id); }

void AsioScheduler::CancelAll() { impl_->CancelAll(); }

}  // namespace bigset
