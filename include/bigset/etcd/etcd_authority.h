// EtcdMembershipAuthority: a MembershipAuthority kept in etcd (v3 API,
// through its JSON gateway: HTTP/1.1, plain or TLS), in libbigset_etcd, a
// library of its own so that libbigset needs no etcd.
//
// Under `prefix` it keeps "<prefix>/epoch" (the latest epoch, in decimal)
// and "<prefix>/rings/<epoch, 20 digits>" (each MembershipRecord::Encode(),
// one key per epoch, never rewritten). Propose is one etcd transaction:
// if "<prefix>/epoch" still holds the expected epoch (or does not exist,
// for 0), write the new epoch and the new ring key; else nothing. The
// watch reads the latest ring key, then watches "<prefix>/rings/" from
// the revision of that read, so that no record between the two is missed;
// after a disconnect it reads the latest again and watches from there.
//
// Endpoints are tried in order, starting from the last that answered; a
// read goes on to the next endpoint when one fails or times out, a
// transaction only when the endpoint surely did not get it. A watch that
// delivered nothing for watch_check_ms is checked with a read on its
// endpoint; if that fails, the watch moves to the next endpoint.
//
// Thread-safety: thread-safe.

#ifndef BIGSET_INCLUDE_BIGSET_ETCD_ETCD_AUTHORITY_H_
#define BIGSET_INCLUDE_BIGSET_ETCD_ETCD_AUTHORITY_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "bigset/cluster/membership_authority.h"
#include "bigset/export.h"

namespace bigset {

struct BIGSET_EXPORT EtcdAuthorityOptions {
  // "HOST:PORT" of etcd's client URLs (at least one).
  std::vector<std::string> endpoints;
  // Every key lives under it, e.g. "/bigset/prod". Not empty, starts with
  // '/', no trailing '/'.
  std::string prefix;
  // TLS to etcd when tls_ca_file is set (etcd's certificate must chain to
  // it and name the endpoint's host); cert and key for etcd's
  // --client-cert-auth.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // Each request's deadline (the watch's connection and head too).
  int request_timeout_ms = 5000;
  // A silent watch is checked this often (see above).
  int watch_check_ms = 3000;
  // Where the watch says what went wrong (etcd unreachable, a record it
  // could not decode), and when it is back: a line, from the watch's
  // thread. May be empty.
  std::function<void(bool warning, std::string_view line)> log;
};

class BIGSET_EXPORT EtcdMembershipAuthority : public MembershipAuthority {
 public:
  // Checks the options (InvalidArgument); connects to nothing yet.
  static absl::StatusOr<std::unique_ptr<EtcdMembershipAuthority>> Create(
      EtcdAuthorityOptions options);
  ~EtcdMembershipAuthority() override;

  absl::StatusOr<std::optional<MembershipRecord>> Latest() override;
  absl::Status Propose(const MembershipRecord& next,
                       uint64_t expected_epoch) override;
  absl::Status Watch(WatchCallback on_record) override;
  void Close() override;

 private:
  class Impl;
  explicit EtcdMembershipAuthority(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace bigset

#endif  // BIGSET_INCLUDE_BIGSET_ETCD_ETCD_AUTHORITY_H_
