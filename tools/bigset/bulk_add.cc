#include "bulk_add.h"

#include <utility>

#include "absl/status/statusor.h"

namespace bigset::tool {

BulkAdd::BulkAdd(Replica& replica, std::string set, uint64_t set_bytes,
                 std::function<void(uint64_t)> on_scanned)
    : replica_(replica),
      set_(std::move(set)),
      switch_after_(set_bytes / kScanBytesPerSeek),
      on_scanned_(std::move(on_scanned)) {}

absl::Status BulkAdd::FillFilter() {
  auto filter = std::make_unique<ElementFilter>();
  absl::StatusOr<std::unique_ptr<SetReader>> reader = replica_.Read(set_);
  if (!reader.ok()) return reader.status();
  std::vector<ElementDots> chunk;
  for (bool more = true; more;) {
    absl::StatusOr<bool> next = (*reader)->Next(&chunk);
    if (!next.ok()) return next.status();
    more = *next;
    for (const ElementDots& e : chunk) filter->Insert(e.element);
    if (on_scanned_) on_scanned_(chunk.size());
  }
  filter_ = std::move(filter);
  return absl::OkStatus();
}

absl::Status BulkAdd::Add(std::vector<std::string>& elements,
                          uint64_t* changed) {
  lines_ += elements.size();
  // The read goes through what earlier batches added too, and the tool
  // holds the store's lock: nothing else adds meanwhile, so the filter
  // stays exact but for its false positives.
  if (filter_ == nullptr && lines_ >= switch_after_) {
    if (absl::Status s = FillFilter(); !s.ok()) return s;
  }
  std::vector<UpdateOp> ops;
  ops.reserve(elements.size());
  for (std::string& e : elements) {
    UpdateOp op = UpdateOp::Add(std::move(e));
    // Like LocalSets: an add replaces the element's dots (one key per
    // element); a seek unless the filter says there are none.
    op.context_from_replica = true;
    if (filter_ != nullptr) {
      op.context_from_replica = filter_->MayContain(op.element);
      filter_->Insert(op.element);
    }
    ops.push_back(std::move(op));
  }
  absl::StatusOr<Delta> delta = replica_.Update(set_, ops);
  if (!delta.ok()) return delta.status();
  *changed += delta->ops.size();
  return absl::OkStatus();
}

}  // namespace bigset::tool
