// SetLocks: runs the commands of one node that must not overlap on one set
// (SPOP, SMOVE's source) one after the other, in arrival order. A holder
// reads the set and writes what it read before the next one reads, so two
// SPOPs coordinated by one node never pick the same member (a quorum read
// after a quorum write sees it: R + W > N).
//
// Thread-safety: not thread-safe; the server's thread only.

#ifndef BIGSET_TOOLS_BIGSETD_SET_LOCKS_H_
#define BIGSET_TOOLS_BIGSETD_SET_LOCKS_H_

#include <deque>
#include <functional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace bigset::server {

class SetLocks {
 public:
  // Runs `fn` now if nobody holds `set`, else once the holders before it
  // released it. `fn` holds the lock until it calls Release(set).
  void Acquire(const std::string& set, std::function<void()> fn) {
    auto [it, fresh] = waiting_.try_emplace(set);
    if (fresh) {
      fn();
    } else {
      it->second.push_back(std::move(fn));
    }
  }
  // REQUIRES: the caller holds `set`. The next waiter, if any, runs now.
  void Release(const std::string& set) {
    auto it = waiting_.find(set);
    if (it == waiting_.end()) return;
    if (it->second.empty()) {
      waiting_.erase(it);
      return;
    }
    std::function<void()> next = std::move(it->second.front());
    it->second.pop_front();
    next();
  }
  size_t held() const { return waiting_.size(); }

 private:
  // A key per held set: its waiters, oldest first.
  absl::flat_hash_map<std::string, std::deque<std::function<void()>>> waiting_;
};

}  // namespace bigset::server

#endif  // BIGSET_TOOLS_BIGSETD_SET_LOCKS_H_
