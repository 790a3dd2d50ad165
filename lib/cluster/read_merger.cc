#include "cluster/read_merger.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "net/message.h"

namespace bigset {
namespace {

bool HasDot(const std::vector<Dot>& sorted, Dot d) {
  return std::binary_search(sorted.begin(), sorted.end(), d);
}

}  // namespace

ReadMerger::ReadMerger(std::vector<Clock> clocks)
    : clocks_(std::move(clocks)), buffers_(clocks_.size()) {
  entry_.resize(clocks_.size());
}

Clock ReadMerger::MergedClock() const {
  if (replaced_) return context_;
  Clock c;
  for (const Clock& k : clocks_) c.Merge(k);
  return c;
}

bool ReadMerger::WithinContext(ElementDots* e) const {
  if (!replaced_) return true;
  std::vector<Dot>& dots = e->dots;
  dots.erase(std::remove_if(dots.begin(), dots.end(),
                            [this](Dot d) { return !context_.Seen(d); }),
             dots.end());
  return !dots.empty();
}

bool ReadMerger::Push(size_t r, std::vector<ElementDots> chunk, bool done) {
  Buffer& b = buffers_[r];
  if (!b.empty()) return false;
  b.elements = std::move(chunk);
  return Refilled(r, done);
}

bool ReadMerger::Refilled(size_t r, bool done) {
  Buffer& b = buffers_[r];
  b.head = 0;
  // A chunk must continue its replica's stream: strictly ascending
  // elements, after everything that replica sent and everything merged.
  const std::string* prev = b.has_last ? &b.last : nullptr;
  if (has_merged_ && (prev == nullptr || *prev < last_merged_)) {
    prev = &last_merged_;
  }
  for (ElementDots& e : b.elements) {
    if ((prev != nullptr && e.element <= *prev) || e.dots.empty()) {
      b.elements.clear();
      b.done = false;
      return false;
    }
    prev = &e.element;
    // Replicas send dots ascending and unique; make sure (cheap when so).
    if (!std::is_sorted(e.dots.begin(), e.dots.end())) {
      std::sort(e.dots.begin(), e.dots.end());
    }
    e.dots.erase(std::unique(e.dots.begin(), e.dots.end()), e.dots.end());
  }
  if (!b.elements.empty()) {
    b.last = b.elements.back().element;
    b.has_last = true;
  }
  b.done = done;
  return true;
}

bool ReadMerger::NeedsMore(size_t r) const {
  return !buffers_[r].done && buffers_[r].empty();
}

bool ReadMerger::Finished() const {
  for (const Buffer& b : buffers_) {
    if (!b.done || !b.empty()) return false;
  }
  return true;
}

size_t ReadMerger::Merge(std::vector<ElementDots>* out, size_t limit) {
  // least_last: only replicas still sending bound the merge, and each of
  // them must have something buffered.
  const std::string* smallest_last = nullptr;
  for (const Buffer& b : buffers_) {
    if (b.done) continue;
    if (b.empty()) return 0;
    const std::string& last = b.elements.back().element;
    if (smallest_last == nullptr || last < *smallest_last)
      smallest_last = &last;
  }
  // A copy: merging moves elements out of the buffers.
  std::optional<std::string> least_last;
  if (smallest_last != nullptr) least_last = *smallest_last;
  size_t emitted = 0;
  while (limit == 0 || emitted < limit) {
    // The smallest front element across buffers, and who holds it: one
    // three-way comparison per buffer.
    const std::string* min = nullptr;
    for (size_t r = 0; r < buffers_.size(); ++r) {
      Buffer& b = buffers_[r];
      entry_[r] = nullptr;
      if (b.empty()) continue;
      ElementDots* front = &b.elements[b.head];
      int c = min == nullptr ? -1 : front->element.compare(*min);
      if (c < 0) {
        for (size_t q = 0; q < r; ++q) entry_[q] = nullptr;
        min = &front->element;
      }
      if (c <= 0) entry_[r] = front;
    }
    if (min == nullptr) break;
    if (least_last.has_value() && *least_last < *min) break;
    size_t before = out->size();
    JoinOne(*min, out);
    emitted += out->size() - before;
  }
  return emitted;
}

void ReadMerger::Replace(size_t r, Clock clock) {
  // The context is kept from the first replacement on (a query, which
  // never replaces, never pays for the join).
  if (!replaced_) context_ = MergedClock();
  replaced_ = true;
  clocks_[r] = std::move(clock);
  Buffer& b = buffers_[r];
  b.elements.clear();
  b.head = 0;
  b.done = false;
  b.repairs.clear();
  b.has_last = false;
}

void ReadMerger::JoinOne(const std::string& min,
                         std::vector<ElementDots>* out) {
  last_merged_ = min;
  has_merged_ = true;
  // entry_[r] is replica r's entry for `min` (set by Merge), or null.
  ElementDots* first = nullptr;
  bool everywhere = true;
  for (ElementDots* e : entry_) {
    if (e == nullptr) everywhere = false;
    if (first == nullptr) first = e;
  }
  static const std::vector<Dot> kNone;
  // The common case: every replica holds the same dots; they all survive.
  bool agree = everywhere;
  for (size_t r = 0; agree && r < buffers_.size(); ++r) {
    agree = entry_[r]->dots == first->dots;
  }
  if (agree) {
    if (WithinContext(first)) Emit(first, out);
    for (Buffer& b : buffers_) ++b.head;
    return;
  }
  survivors_.clear();
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (entry_[i] == nullptr) continue;
    for (Dot d : entry_[i]->dots) {
      bool keep = true;
      for (size_t j = 0; j < buffers_.size() && keep; ++j) {
        if (j == i) continue;
        const std::vector<Dot>& dj = entry_[j] ? entry_[j]->dots : kNone;
        // Removed if j has seen the event and does not hold it.
        if (!HasDot(dj, d) && clocks_[j].Seen(d)) keep = false;
      }
      if (keep) survivors_.push_back(d);
    }
  }
  std::sort(survivors_.begin(), survivors_.end());
  survivors_.erase(std::unique(survivors_.begin(), survivors_.end()),
                   survivors_.end());

  // The dots some replica holds that did not survive: removed.
  removed_.clear();
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (entry_[i] == nullptr) continue;
    for (Dot d : entry_[i]->dots) {
      if (!HasDot(survivors_, d)) removed_.push_back(d);
    }
  }
  std::sort(removed_.begin(), removed_.end());
  removed_.erase(std::unique(removed_.begin(), removed_.end()), removed_.end());

  // Repairs: what each replica lacks, and the removes it has not seen:
  // removed dots it still holds (their keys go), and removed dots its clock
  // has never seen (they enter its clock, so that a copy of the key that
  // comes back later, from a replica that lost the remove, stays removed).
  for (size_t r = 0; r < buffers_.size(); ++r) {
    const std::vector<Dot>& have = entry_[r] ? entry_[r]->dots : kNone;
    std::vector<Dot> context;
    for (Dot d : removed_) {
      if (HasDot(have, d) || !clocks_[r].Seen(d)) context.push_back(d);
    }
    if (!context.empty()) {
      buffers_[r].repairs.push_back(DeltaOp{min, std::move(context), {}});
    }
    for (Dot d : survivors_) {
      if (!HasDot(have, d)) buffers_[r].repairs.push_back(DeltaOp{min, {}, d});
    }
  }

  if (!survivors_.empty()) {
    first->dots.swap(survivors_);
    if (WithinContext(first)) Emit(first, out);
  }
  for (size_t r = 0; r < buffers_.size(); ++r) {
    if (entry_[r] != nullptr) ++buffers_[r].head;
  }
}

void ReadMerger::Emit(ElementDots* from, std::vector<ElementDots>* out) {
  if (spares_.empty()) {
    out->emplace_back();
  } else {
    out->push_back(std::move(spares_.back()));
    spares_.pop_back();
  }
  // Swap, not move: the buffer entry gets the spare's capacity back for
  // the next chunk decoded into it.
  out->back().element.swap(from->element);
  out->back().dots.swap(from->dots);
}

void ReadMerger::Recycle(std::vector<ElementDots>* consumed) {
  for (ElementDots& e : *consumed) spares_.push_back(std::move(e));
  consumed->clear();
}

std::vector<DeltaOp> ReadMerger::TakeRepairs(size_t r) {
  std::vector<DeltaOp> out;
  out.swap(buffers_[r].repairs);
  return out;
}

std::string EncodeRepair(uint32_t partition, const std::string& set,
                         std::vector<DeltaOp> ops) {
  Delta delta;
  delta.set = set;
  delta.ops = std::move(ops);
  std::string bytes;
  EncodeDeltaMessage(MessageHeader{MessageType::kRepair, 0, partition}, delta,
                     &bytes);
  return bytes;
}

}  // namespace bigset
