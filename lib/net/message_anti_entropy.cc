// The anti-entropy messages: digest rounds, set summaries, pulls and pushes.

#include <utility>

#include "net/message.h"
#include "net/message_body.h"

namespace bigset {
namespace msg {

using message_internal::PutElements;
using message_internal::PutStatus;
using message_internal::PutSummaries;

void AeDigest::EncodeBody(std::string* dst) const {
  coding::PutFixed64BE(dst, digest);
  coding::PutVarint64(dst, bucket_count);
}

bool AeDigest::DecodeBody(BodyReader* d) {
  return d->Fixed64(&digest) && d->Varint(&bucket_count);
}

void AeDigestReply::EncodeBody(std::string* dst) const {
  PutStatus(dst, status);
  dst->push_back(static_cast<char>(digests_equal ? 1 : 0));
  coding::PutVarint64(dst, bucket_digests.size());
  for (uint64_t v : bucket_digests) coding::PutFixed64BE(dst, v);
}

bool AeDigestReply::DecodeBody(BodyReader* d) {
  uint8_t equal = 0;
  uint64_t n = 0;
  if (!d->Status(&status) || !d->Byte(&equal) || equal > 1 ||
      !d->Count(8, &n)) {
    return false;
  }
  digests_equal = equal == 1;
  bucket_digests.resize(static_cast<size_t>(n));
  for (uint64_t& v : bucket_digests) {
    if (!d->Fixed64(&v)) return false;
  }
  return true;
}

void AeSets::EncodeBody(std::string* dst) const {
  coding::PutVarint64(dst, bucket_ids.size());
  for (uint64_t v : bucket_ids) coding::PutVarint64(dst, v);
  PutSummaries(dst, summaries, /*with_clocks=*/false);
}

bool AeSets::DecodeBody(BodyReader* d) {
  uint64_t n = 0;
  if (!d->Count(1, &n)) return false;
  bucket_ids.resize(static_cast<size_t>(n));
  for (uint64_t& v : bucket_ids) {
    if (!d->Varint(&v)) return false;
  }
  return d->Summaries(&summaries, /*with_clocks=*/false);
}

void AeSetsReply::EncodeBody(std::string* dst) const {
  PutStatus(dst, status);
  PutSummaries(dst, summaries, /*with_clocks=*/true);
}

bool AeSetsReply::DecodeBody(BodyReader* d) {
  return d->Status(&status) && d->Summaries(&summaries, /*with_clocks=*/true);
}

void AePull::EncodeBody(std::string* dst) const {
  coding::PutLengthPrefixed(dst, set);
  coding::PutLengthPrefixed(dst, dots.Encode());
}

bool AePull::DecodeBody(BodyReader* d) {
  return d->String(&set) && d->Clock(&dots);
}

void AePush::EncodeBody(std::string* dst) const {
  coding::PutLengthPrefixed(dst, set);
  coding::PutVarint64(dst, seq);
  dst->push_back(static_cast<char>(last ? 1 : 0));
  if (last) coding::PutLengthPrefixed(dst, dots.Encode());
  PutElements(dst, elements);
}

bool AePush::DecodeBody(BodyReader* d) {
  uint8_t flag = 0;
  if (!d->String(&set) || !d->Varint(&seq) || !d->Byte(&flag) || flag > 1) {
    return false;
  }
  last = flag == 1;
  return (!last || d->Clock(&dots)) && d->Elements(&elements);
}

void AePushAck::EncodeBody(std::string* dst) const {
  PutStatus(dst, status);
  coding::PutVarint64(dst, seq);
}

bool AePushAck::DecodeBody(BodyReader* d) {
  return d->Status(&status) && d->Varint(&seq);
}

}  // namespace msg
}  // namespace bigset
