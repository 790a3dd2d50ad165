#include "cluster/dispatcher.h"

#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

namespace bigset {

Dispatcher::Route& Dispatcher::RouteOf(MessageType type) {
  return routes_[static_cast<size_t>(type)];
}

void Dispatcher::OnRaw(MessageType type, RawHandler handler) {
  RouteOf(type).raw = std::move(handler);
}

void Dispatcher::OnDecoded(MessageType type, Handler handler, bool bulk) {
  Route& route = RouteOf(type);
  route.decoded = std::move(handler);
  route.bulk = bulk;
}

absl::Status Dispatcher::CheckComplete() const {
  for (size_t t = 1; t <= kMaxMessageType; ++t) {
    const Route& route = routes_[t];
    if ((route.raw == nullptr) == (route.decoded == nullptr)) {
      return absl::InternalError(absl::StrCat(
          "message type ", MessageTypeName(static_cast<MessageType>(t)),
          route.raw == nullptr ? " has no handler" : " has two handlers"));
    }
  }
  return absl::OkStatus();
}

bool Dispatcher::Dispatch(NodeId from, std::string_view bytes) {
  MessageHeader header;
  std::string_view body;
  if (!ParseHeader(bytes, &header, &body).ok()) return false;
  Route& route = RouteOf(header.type);
  if (route.raw != nullptr) return route.raw(from, header, body);
  if (route.decoded == nullptr) return false;
  if (route.bulk && !bulk_busy_) {
    if (!DecodeMessageInto(bytes, &bulk_).ok()) return false;
    bulk_busy_ = true;
    absl::Cleanup done = [this]() { bulk_busy_ = false; };
    route.decoded(from, bulk_);
    return true;
  }
  absl::StatusOr<Message> m = DecodeMessage(bytes);
  if (!m.ok()) return false;
  route.decoded(from, *m);
  return true;
}

}  // namespace bigset
