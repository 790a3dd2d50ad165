#include "cluster/read_sink.h"

#include <utility>

#include "replica/continuation.h"

namespace bigset {
namespace {

class HandlerSink final : public ReadSink {
 public:
  explicit HandlerSink(ReadHandler* handler) : handler_(handler) {}
  void OnClock(const Clock& clock) override { handler_->OnClock(clock); }
  bool OnChunk(std::vector<ElementDots>* elements,
               std::function<void()> next) override {
    handler_->OnChunk(elements, std::move(next));
    return false;
  }
  void OnDone(absl::Status status) override { handler_->OnDone(status); }

 private:
  ReadHandler* handler_;
};

class RangeSink final : public ReadSink {
 public:
  RangeSink(size_t limit, std::function<void(absl::StatusOr<RangeResult>)> done)
      : limit_(limit), done_(std::move(done)) {}
  void OnClock(const Clock&) override {}
  bool OnChunk(std::vector<ElementDots>* elements,
               std::function<void()>) override {
    for (ElementDots& e : *elements) result_.elements.push_back(std::move(e));
    return true;
  }
  void OnDone(absl::Status status) override {
    if (!status.ok()) {
      done_(status);
      return;
    }
    if (limit_ != 0 && result_.elements.size() >= limit_) {
      result_.continuation =
          EncodeContinuation(result_.elements.back().element);
    }
    done_(std::move(result_));
  }

 private:
  const size_t limit_;
  std::function<void(absl::StatusOr<RangeResult>)> done_;
  RangeResult result_;
};

class CountSink final : public ReadSink {
 public:
  explicit CountSink(std::function<void(absl::StatusOr<uint64_t>)> done)
      : done_(std::move(done)) {}
  void OnClock(const Clock&) override {}
  bool OnChunk(std::vector<ElementDots>* elements,
               std::function<void()>) override {
    count_ += elements->size();
    return true;
  }
  void OnDone(absl::Status status) override {
    if (!status.ok()) {
      done_(status);
    } else {
      done_(count_);
    }
  }

 private:
  std::function<void(absl::StatusOr<uint64_t>)> done_;
  uint64_t count_ = 0;
};

}  // namespace

std::unique_ptr<ReadSink> NewHandlerSink(ReadHandler* handler) {
  return std::make_unique<HandlerSink>(handler);
}

std::unique_ptr<ReadSink> NewRangeSink(
    size_t limit, std::function<void(absl::StatusOr<RangeResult>)> done) {
  return std::make_unique<RangeSink>(limit, std::move(done));
}

std::unique_ptr<ReadSink> NewCountSink(
    std::function<void(absl::StatusOr<uint64_t>)> done) {
  return std::make_unique<CountSink>(std::move(done));
}

}  // namespace bigset
