#include "worker.h"

#include <utility>

namespace bigset::server {

Worker::Worker() : thread_([this] { Loop(); }) {}

Worker::~Worker() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void Worker::Run(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

void Worker::Loop() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Worker* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return w->stop_ || !w->tasks_.empty();
          },
          this));
      if (tasks_.empty()) return;  // Stopped, and nothing left.
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace bigset::server
