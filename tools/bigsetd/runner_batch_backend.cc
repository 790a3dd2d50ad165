#include "runner_batch_backend.h"

#include <utility>

namespace bigset::server {
namespace {

// `done`, posted to `io` with the value it gets.
template <typename T>
std::function<void(T)> OnThread(asio::io_context* io,
                                std::function<void(T)> done) {
  return [io, done = std::move(done)](T value) mutable {
    asio::post(*io,
               [done = std::move(done), value = std::move(value)]() mutable {
                 done(std::move(value));
               });
  };
}

}  // namespace

void RunnerBatchBackend::ContainsAll(
    std::string set, std::vector<std::string> elements, int r,
    uint64_t timeout_micros, uint64_t hedge_micros,
    std::function<void(absl::StatusOr<Membership>)> done) {
  ClusterReadOptions o;
  o.r = r;
  o.timeout_micros = timeout_micros > 0 ? timeout_micros : timeout_micros_;
  o.query_hedge_micros = hedge_micros_ != 0 ? hedge_micros_ : hedge_micros;
  runner_->ContainsAll(std::move(set), std::move(elements), o,
                       OnThread(io_, std::move(done)));
}

void RunnerBatchBackend::Update(
    std::string set, std::vector<UpdateOp> ops, int w, uint64_t timeout_micros,
    std::function<void(absl::StatusOr<Delta>)> done) {
  ClusterWriteOptions o;
  o.w = w;
  o.timeout_micros = timeout_micros > 0 ? timeout_micros : timeout_micros_;
  runner_->Update(std::move(set), std::move(ops), o,
                  OnThread(io_, std::move(done)));
}

}  // namespace bigset::server
