// RunnerBatchBackend: SetBatcher's backend on this process's node: each
// call goes to the NodeRunner, each answer is posted back to the server's
// thread.
//
// Thread-safety: the calls are made, and the callbacks run, on the thread
// that runs `io`.

#ifndef BIGSET_TOOLS_BIGSETD_RUNNER_BATCH_BACKEND_H_
#define BIGSET_TOOLS_BIGSETD_RUNNER_BATCH_BACKEND_H_

#include <asio.hpp>
#include <cstdint>

#include "bigset/network/node_runner.h"
#include "set_batcher.h"

namespace bigset::server {

class RunnerBatchBackend final : public BatchBackend {
 public:
  // REQUIRES: `io` and `runner` outlive the backend; `timeout_micros` is
  // a request's deadline when the batcher gives none, `hedge_micros` every
  // read's hedge (ClusterReadOptions::query_hedge_micros; 0: each read's
  // own, as the batcher asks).
  RunnerBatchBackend(asio::io_context* io, NodeRunner* runner,
                     uint64_t timeout_micros, uint64_t hedge_micros)
      : io_(io),
        runner_(runner),
        timeout_micros_(timeout_micros),
        hedge_micros_(hedge_micros) {}

  void ContainsAll(
      std::string set, std::vector<std::string> elements, int r,
      uint64_t timeout_micros, uint64_t hedge_micros,
      std::function<void(absl::StatusOr<Membership>)> done) override;
  void Update(std::string set, std::vector<UpdateOp> ops, int w,
              uint64_t timeout_micros,
              std::function<void(absl::StatusOr<Delta>)> done) override;

 private:
  asio::io_context* const io_;
  NodeRunner* const runner_;
  const uint64_t timeout_micros_;
  const uint64_t hedge_micros_;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_RUNNER_BATCH_BACKEND_H_
