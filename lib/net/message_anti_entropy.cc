// The anti-entropy messages: digest rounds, set summaries, pulls and pushes.

#include <utility>

#include "net/message.h"
#include "net/message_body.h"

namespace bigset {
namespace message_internal {

void EncodeAntiEntropyBody(const Message& m, std::string* dst) {
  switch (m.type()) {
    case MessageType::kAeDigest:
      coding::PutFixed64BE(dst, m.digest);
      coding::PutVarint64(dst, m.bucket_count);
      break;
    case MessageType::kAeDigestReply:
      PutStatus(dst, m.status);
      dst->push_back(static_cast<char>(m.digests_equal ? 1 : 0));
      coding::PutVarint64(dst, m.bucket_digests.size());
      for (uint64_t v : m.bucket_digests) coding::PutFixed64BE(dst, v);
      break;
    case MessageType::kAeSets:
      coding::PutVarint64(dst, m.bucket_ids.size());
      for (uint64_t v : m.bucket_ids) coding::PutVarint64(dst, v);
      PutSummaries(dst, m.summaries, /*with_clocks=*/false);
      break;
    case MessageType::kAeSetsReply:
      PutStatus(dst, m.status);
      PutSummaries(dst, m.summaries, /*with_clocks=*/true);
      break;
    case MessageType::kAePull:
      coding::PutLengthPrefixed(dst, m.set);
      coding::PutLengthPrefixed(dst, m.clock.Encode());
      break;
    case MessageType::kAePush:
      coding::PutLengthPrefixed(dst, m.set);
      coding::PutVarint64(dst, m.seq);
      dst->push_back(static_cast<char>(m.done ? 1 : 0));
      if (m.done) coding::PutLengthPrefixed(dst, m.clock.Encode());
      PutElements(dst, m.elements);
      break;
    case MessageType::kAePushAck:
      PutStatus(dst, m.status);
      coding::PutVarint64(dst, m.seq);
      break;
    default:
      break;
  }
}

namespace {

bool DecodeDigestReply(BodyReader* d, Message* m) {
  uint8_t equal = 0;
  uint64_t n = 0;
  if (!d->Status(&m->status) || !d->Byte(&equal) || equal > 1 ||
      !d->Count(8, &n)) {
    return false;
  }
  m->digests_equal = equal == 1;
  m->bucket_digests.resize(static_cast<size_t>(n));
  for (uint64_t& v : m->bucket_digests) {
    if (!d->Fixed64(&v)) return false;
  }
  return true;
}

bool DecodeSets(BodyReader* d, Message* m) {
  uint64_t n = 0;
  if (!d->Count(1, &n)) return false;
  m->bucket_ids.resize(static_cast<size_t>(n));
  for (uint64_t& v : m->bucket_ids) {
    if (!d->Varint(&v)) return false;
  }
  return d->Summaries(&m->summaries, /*with_clocks=*/false);
}

bool DecodePush(BodyReader* d, Message* m, std::vector<ElementDots>* spare) {
  uint8_t flags = 0;
  if (!d->String(&m->set) || !d->Varint(&m->seq) || !d->Byte(&flags) ||
      flags > 1) {
    return false;
  }
  m->done = flags == 1;
  m->elements = std::move(*spare);
  return (!m->done || d->Clock(&m->clock)) && d->Elements(&m->elements);
}

}  // namespace

bool DecodeAntiEntropyBody(BodyReader* d, Message* m,
                           std::vector<ElementDots>* spare) {
  switch (m->type()) {
    case MessageType::kAeDigest:
      return d->Fixed64(&m->digest) && d->Varint(&m->bucket_count);
    case MessageType::kAeDigestReply:
      return DecodeDigestReply(d, m);
    case MessageType::kAeSets:
      return DecodeSets(d, m);
    case MessageType::kAeSetsReply:
      return d->Status(&m->status) &&
             d->Summaries(&m->summaries, /*with_clocks=*/true);
    case MessageType::kAePull:
      return d->String(&m->set) && d->Clock(&m->clock);
    case MessageType::kAePush:
      return DecodePush(d, m, spare);
    case MessageType::kAePushAck:
      return d->Status(&m->status) && d->Varint(&m->seq);
    default:
      return false;
  }
}

}  // namespace message_internal
}  // namespace bigset
