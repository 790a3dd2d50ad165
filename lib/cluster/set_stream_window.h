// SetStreamWindow: the sending side of a set stream (see
// set_stream_receiver.h for the protocol): the chunks of the current set
// sent and not yet acknowledged, in order, at most `capacity` of them.
// Hand-off transfers keep several in flight (the receiver applies one while
// the next travel); anti-entropy pushes keep one (they are rate limited).
// Internal header.
//
// The receiver applies a set's chunks in order and ignores those past a
// gap, so an acknowledgement of chunk k acknowledges every chunk up to k,
// and a retransmission sends every chunk in the window again (go-back-N).
// Each chunk is kept encoded: a retransmission re-sends the same bytes.
//
// Thread-safety: not thread-safe; a value owned by one sender.

#ifndef BIGSET_LIB_CLUSTER_SET_STREAM_WINDOW_H_
#define BIGSET_LIB_CLUSTER_SET_STREAM_WINDOW_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>

namespace bigset {

class SetStreamWindow {
 public:
  explicit SetStreamWindow(size_t capacity = 1)
      : capacity_(std::max<size_t>(1, capacity)) {}

  bool empty() const { return chunks_.empty(); }
  // A set's first chunk travels alone: the receiver starts the set's state
  // from it, and a later chunk arriving first would find no state and be
  // taken for a lost one (the set would restart). Once it is acknowledged,
  // up to `capacity` chunks are in flight.
  bool full() const {
    return chunks_.size() >= (started_ ? capacity_ : size_t{1});
  }
  size_t size() const { return chunks_.size(); }

  // The bytes in flight.
  size_t bytes() const {
    size_t n = 0;
    for (const Chunk& c : chunks_) n += c.bytes.size();
    return n;
  }

  // The sequence number the next chunk of the set takes.
  uint64_t next_seq() const { return next_seq_; }

  // Adds the set's next chunk (numbered next_seq()), encoded, and returns
  // its bytes for sending. `last`: the set's last chunk. REQUIRES: !full().
  const std::string& Add(bool last, std::string bytes) {
    chunks_.push_back(Chunk{next_seq_++, last, std::move(bytes)});
    return chunks_.back().bytes;
  }

  // Whether chunk `seq` is in flight (an acknowledgement of another is
  // stale or a duplicate).
  bool Holds(uint64_t seq) const {
    return std::any_of(chunks_.begin(), chunks_.end(),
                       [seq](const Chunk& c) { return c.seq == seq; });
  }

  // Chunk `seq` was applied, and with it every chunk before it: they leave
  // the window. Returns whether the set's last chunk was among them.
  bool Acknowledge(uint64_t seq) {
    started_ = true;
    bool last = false;
    while (!chunks_.empty() && chunks_.front().seq <= seq) {
      last |= chunks_.front().last;
      chunks_.pop_front();
    }
    return last;
  }

  // Calls send(bytes) for every chunk in flight, oldest first.
  template <typename F>
  void ForEach(F&& send) const {
    for (const Chunk& c : chunks_) send(c.bytes);
  }

  // Forgets the chunks in flight and starts a set (or the same set again,
  // from a new snapshot) at seq 0.
  void Restart() {
    chunks_.clear();
    next_seq_ = 0;
    started_ = false;
  }

 private:
  struct Chunk {
    uint64_t seq = 0;
    bool last = false;
    std::string bytes;
  };

  size_t capacity_;
  uint64_t next_seq_ = 0;
  bool started_ = false;  // The set's first chunk was acknowledged.
  std::deque<Chunk> chunks_;
};

}  // namespace bigset

#endif  // BIGSET_LIB_CLUSTER_SET_STREAM_WINDOW_H_
