// Worker: one thread that runs queued tasks in order, for calls that wait
// (on the node's thread, or on disk) and must not stall the server's
// thread. A task posts its result back to the server itself.
//
// Thread-safety: thread-safe. The destructor runs what is queued and joins.

#ifndef BIGSET_TOOLS_BIGSETD_WORKER_H_
#define BIGSET_TOOLS_BIGSETD_WORKER_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace bigset::server {

class Worker {
 public:
  Worker();
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void Run(std::function<void()> task);

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_WORKER_H_
