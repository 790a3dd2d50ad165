#include "bigset/etcd/etcd_authority.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/string_view_compat.h"
#include "etcd/http_client.h"
#include "etcd/json.h"

namespace bigset {

using etcd::HttpClient;
using etcd::HttpEndpoint;
using etcd::Json;
using etcd::JsonQuote;

namespace {

std::string B64(absl::string_view s) { return absl::Base64Escape(s); }

// The first key after every key that starts with `prefix`.
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xFF) {
      prefix.back() = static_cast<char>(prefix.back() + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // Every key.
}

absl::StatusOr<HttpEndpoint> ParseEndpoint(absl::string_view text) {
  absl::string_view rest = text;
  absl::ConsumePrefix(&rest, "http://") ||
      absl::ConsumePrefix(&rest, "https://");
  absl::ConsumeSuffix(&rest, "/");
  HttpEndpoint e;
  absl::string_view port;
  if (absl::StartsWith(rest, "[")) {
    const size_t close = rest.find("]:");
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint \"", text, "\" is not HOST:PORT"));
    }
    e.host = std::string(rest.substr(1, close - 1));
    port = rest.substr(close + 2);
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint \"", text, "\" is not HOST:PORT"));
    }
    e.host = std::string(rest.substr(0, colon));
    port = rest.substr(colon + 1);
  }
  uint32_t p = 0;
  if (!absl::SimpleAtoi(port, &p) || p == 0 || p > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd endpoint \"", text, "\": bad port"));
  }
  e.port = static_cast<uint16_t>(p);
  return e;
}

// etcd's error answer ({"error": ..., "message": ...}) or the body itself.
std::string ErrorText(const std::string& body) {
  absl::StatusOr<Json> j = Json::Parse(body);
  if (j.ok()) {
    if (const Json* m = j->Find("message"); m != nullptr) return m->text();
    if (const Json* m = j->Find("error"); m != nullptr) return m->text();
  }
  return body.substr(0, 200);
}

absl::StatusOr<MembershipRecord> RecordOf(const Json& kv) {
  const Json* value = kv.Find("value");
  std::string bytes;
  if (value == nullptr || !absl::Base64Unescape(value->text(), &bytes)) {
    return absl::DataLossError("etcd key without a base64 value");
  }
  return MembershipRecord::Decode(bytes);
}

}  // namespace

class EtcdMembershipAuthority::Impl {
 public:
  Impl(EtcdAuthorityOptions options, std::vector<HttpEndpoint> endpoints)
      : options_(std::move(options)),
        endpoints_(std::move(endpoints)),
        epoch_key_(options_.prefix + "/epoch"),
        rings_prefix_(options_.prefix + "/rings/"),
        timeout_(absl::Milliseconds(options_.request_timeout_ms)),
        check_every_(absl::Milliseconds(options_.watch_check_ms)) {}

  ~Impl() { Close(); }

  // The latest record and the store's revision at that read.
  struct Latest {
    std::optional<MembershipRecord> record;
    int64_t revision = 0;
  };

  // From the endpoints in turn; `only` pins one endpoint (the watch's).
  absl::StatusOr<Latest> ReadLatest(const HttpEndpoint* only = nullptr) {
    const std::string body = absl::StrCat(
        "{\"key\":", JsonQuote(B64(rings_prefix_)),
        ",\"range_end\":", JsonQuote(B64(PrefixEnd(rings_prefix_))),
        ",\"limit\":\"1\",\"sort_order\":\"DESCEND\",\"sort_target\":"
        "\"KEY\"}");
    absl::StatusOr<Json> j =
        Call("/v3/kv/range", body, /*idempotent=*/true, only);
    if (!j.ok()) return j.status();
    Latest out;
    if (absl::Status s = Revision(*j, &out.revision); !s.ok()) return s;
    if (const Json* kvs = j->Find("kvs");
        kvs != nullptr && !kvs->items().empty()) {
      absl::StatusOr<MembershipRecord> r = RecordOf(kvs->items()[0]);
      if (!r.ok()) {
        return absl::DataLossError(
            absl::StrCat("the latest ring under ", rings_prefix_,
                         " in etcd: ", r.status().message()));
      }
      out.record = std::move(*r);
    }
    return out;
  }

  absl::Status Propose(const MembershipRecord& next, uint64_t expected) {
    if (next.epoch <= expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "proposed epoch ", next.epoch, " is not above ", expected));
    }
    const std::string compare =
        expected == 0
            ? absl::StrCat(
                  "{\"target\":\"CREATE\",\"key\":", JsonQuote(B64(epoch_key_)),
                  ",\"create_revision\":\"0\"}")
            : absl::StrCat(
                  "{\"target\":\"VALUE\",\"key\":", JsonQuote(B64(epoch_key_)),
                  ",\"value\":", JsonQuote(B64(absl::StrCat(expected))), "}");
    const std::string ring_key =
        absl::StrCat(rings_prefix_, absl::StrFormat("%020d", next.epoch));
    // Also: the ring key must not exist (a ring is written once).
    const std::string body = absl::StrCat(
        "{\"compare\":[", compare,
        ",{\"target\":\"CREATE\",\"key\":", JsonQuote(B64(ring_key)),
        ",\"create_revision\":\"0\"}],\"success\":[",
        "{\"request_put\":{\"key\":", JsonQuote(B64(epoch_key_)),
        ",\"value\":", JsonQuote(B64(absl::StrCat(next.epoch))), "}},",
        "{\"request_put\":{\"key\":", JsonQuote(B64(ring_key)),
        ",\"value\":", JsonQuote(B64(next.Encode())),
        "}}],\"failure\":[{\"request_range\":{\"key\":",
        JsonQuote(B64(epoch_key_)), "}}]}");
    absl::StatusOr<Json> j =
        Call("/v3/kv/txn", body, /*idempotent=*/false, nullptr);
    if (!j.ok()) return j.status();
    const Json* ok = j->Find("succeeded");
    if (ok != nullptr && ok->boolean()) return absl::OkStatus();
    // Lost: to whom? If the latest ring is still `expected`, nobody won:
    // the epoch key is not what the rings say (an operator's mistake).
    std::string epoch_value = "nothing (the key does not exist)";
    if (const Json* responses = j->Find("responses");
        responses != nullptr && !responses->items().empty()) {
      const Json* range = responses->items()[0].Find("response_range");
      const Json* kvs = range == nullptr ? nullptr : range->Find("kvs");
      if (kvs != nullptr && !kvs->items().empty()) {
        const Json* v = kvs->items()[0].Find("value");
        std::string raw;
        if (v != nullptr && absl::Base64Unescape(v->text(), &raw)) {
          epoch_value = absl::StrCat("\"", absl::CHexEscape(raw), "\"");
        }
      }
    }
    absl::StatusOr<Latest> latest = ReadLatest();
    if (!latest.ok()) {
      return absl::AbortedError(absl::StrCat(
          "the ring in etcd is no longer at epoch ", expected,
          " (could not read which change won: ", latest.status().message(),
          ")"));
    }
    const uint64_t now = latest->record.has_value() ? latest->record->epoch : 0;
    if (now == expected) {
      return absl::FailedPreconditionError(absl::StrCat(
          "etcd's ", epoch_key_, " holds ", epoch_value,
          " but its latest ring is epoch ", expected, " (under ", rings_prefix_,
          "): repair it (etcdctl put ", epoch_key_, " ", expected, ")"));
    }
    return absl::AbortedError(
        absl::StrCat("another change took the ring to epoch ", now,
                     " meanwhile (", latest->record->change, ")"));
  }

  absl::Status Watch(WatchCallback on_record) {
    absl::MutexLock lock(&mu_);
    if (watching_) return absl::FailedPreconditionError("already watching");
    if (stopping_) return absl::CancelledError("closed");
    watching_ = true;
    thread_ = std::thread([this, cb = std::move(on_record)]() { Loop(cb); });
    checker_ = std::thread([this]() { CheckLoop(); });
    return absl::OkStatus();
  }

  void Close() {
    std::thread t, c;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      if (watch_client_ != nullptr) watch_client_->Cancel();
      for (HttpClient* client : active_) client->Cancel();
      t = std::move(thread_);
      c = std::move(checker_);
    }
    if (t.joinable()) t.join();
    if (c.joinable()) c.join();
  }

 private:
  static absl::Status Revision(const Json& j, int64_t* revision) {
    const Json* header = j.Find("header");
    const Json* rev = header == nullptr ? nullptr : header->Find("revision");
    std::optional<int64_t> v = rev == nullptr ? std::nullopt : rev->AsInt();
    if (!v.has_value() || *v < 0) {
      return absl::DataLossError("etcd answer without a revision");
    }
    *revision = *v;
    return absl::OkStatus();
  }

  // POSTs to the endpoints in turn (from the last that answered) until one
  // answers; the answer parsed. A request that may have been applied (it
  // timed out) goes to no other endpoint unless it is `idempotent`.
  absl::StatusOr<Json> Call(absl::string_view path, absl::string_view body,
                            bool idempotent, const HttpEndpoint* only) {
    absl::Status last = absl::UnavailableError("no etcd endpoint");
    const size_t start = preferred_.load();
    const size_t tries = only != nullptr ? 1 : endpoints_.size();
    for (size_t k = 0; k < tries; ++k) {
      const size_t i = (start + k) % endpoints_.size();
      HttpClient client(only != nullptr ? *only : endpoints_[i]);
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return absl::CancelledError("closed");
        active_.insert(&client);
      }
      absl::StatusOr<HttpClient::Response> r =
          client.Post(path, body, timeout_);
      {
        absl::MutexLock lock(&mu_);
        active_.erase(&client);
      }
      if (!r.ok()) {
        last = r.status();
        if (absl::IsCancelled(last)) return last;
        if (only == nullptr) {
          // The next call starts at the next endpoint.
          size_t expected = i;
          preferred_.compare_exchange_strong(expected,
                                             (i + 1) % endpoints_.size());
        }
        if (!absl::IsUnavailable(last) && !idempotent) return last;
        continue;
      }
      if (only == nullptr) preferred_.store(i);
      if (r->status != 200) {
        return absl::UnavailableError(absl::StrCat(
            "etcd answered HTTP ", r->status, ": ", ErrorText(r->body)));
      }
      absl::StatusOr<Json> j = Json::Parse(r->body);
      if (!j.ok()) {
        return absl::DataLossError(
            absl::StrCat("etcd's answer: ", j.status().message()));
      }
      return j;
    }
    return last;
  }

  void Log(bool warning, absl::string_view line) {
    if (options_.log) options_.log(warning, ToStd(line));
  }

  bool Stopping() {
    absl::MutexLock lock(&mu_);
    return stopping_;
  }

  // Sleeps `d` or until Close; false if closing.
  bool Sleep(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
    return !stopping_;
  }

  void Loop(const WatchCallback& cb) {
    absl::Duration backoff = absl::Milliseconds(100);
    bool failing = false;
    while (!Stopping()) {
      absl::StatusOr<Latest> latest = ReadLatest();
      absl::Status s = latest.status();
      size_t endpoint = preferred_.load();
      if (latest.ok()) {
        if (failing) Log(false, "etcd: reachable again, watching the ring");
        failing = false;
        backoff = absl::Milliseconds(100);
        Delivered(latest->record);
        cb(latest->record);
        s = WatchFrom(endpoints_[endpoint], latest->revision + 1, cb);
        if (Stopping()) return;
        s = absl::Status(s.code(),
                         absl::StrCat("the watch ended (", s.message(), ")"));
      } else if (absl::IsCancelled(s)) {
        return;
      }
      if (!failing) {
        Log(true, absl::StrCat("etcd: ", s.message(),
                               "; the node goes on with the ring it has and "
                               "retries"));
        failing = true;
      }
      // Jittered, so that nodes do not come back in step.
      const absl::Duration wait =
          backoff * (0.5 + 0.5 * static_cast<double>(jitter_() % 1000) / 1000);
      if (!Sleep(wait)) return;
      backoff = std::min(backoff * 2, absl::Seconds(2));
      // The next watch starts at another endpoint.
      size_t expected = endpoint;
      preferred_.compare_exchange_strong(expected,
                                         (endpoint + 1) % endpoints_.size());
    }
  }

  void Delivered(const std::optional<MembershipRecord>& record) {
    absl::MutexLock lock(&mu_);
    if (record.has_value()) delivered_epoch_ = record->epoch;
    last_event_ = absl::Now();
  }

  // While the watch is silent, checks every check_every_ that its endpoint
  // answers and holds no newer ring than the watch showed; else ends the
  // watch, which the loop then makes again (elsewhere).
  void CheckLoop() {
    while (Sleep(check_every_)) {
      std::shared_ptr<HttpClient> client;
      HttpEndpoint endpoint;
      uint64_t delivered = 0;
      {
        absl::MutexLock lock(&mu_);
        if (watch_client_ == nullptr ||
            absl::Now() - last_event_ < check_every_) {
          continue;
        }
        client = watch_client_;
        endpoint = watch_endpoint_;
        delivered = delivered_epoch_;
      }
      absl::StatusOr<Latest> latest = ReadLatest(&endpoint);
      if (absl::IsCancelled(latest.status())) return;
      std::string why;
      if (!latest.ok()) {
        why = std::string(latest.status().message());
      } else if (latest->record.has_value() &&
                 latest->record->epoch > delivered) {
        why = absl::StrCat("etcd holds ring epoch ", latest->record->epoch,
                           ", the watch showed ", delivered);
      } else {
        absl::MutexLock lock(&mu_);
        last_event_ = absl::Now();
        continue;
      }
      Log(true,
          absl::StrCat("etcd: the watch on ", endpoint.host, ":", endpoint.port,
                       " looks dead (", why, "): watching again"));
      client->Cancel();
    }
  }

  // Streams the rings put from `revision` on; returns why it ended.
  absl::Status WatchFrom(const HttpEndpoint& endpoint, int64_t revision,
                         const WatchCallback& cb) {
    auto client = std::make_shared<HttpClient>(endpoint);
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return absl::CancelledError("closed");
      watch_client_ = client;
      watch_endpoint_ = endpoint;
      last_event_ = absl::Now();
    }
    const std::string body = absl::StrCat(
        "{\"create_request\":{\"key\":", JsonQuote(B64(rings_prefix_)),
        ",\"range_end\":", JsonQuote(B64(PrefixEnd(rings_prefix_))),
        ",\"start_revision\":\"", revision, "\"}}");
    absl::Status s = client->PostStream(
        "/v3/watch", body, timeout_, [&](absl::string_view line) {
          absl::StatusOr<Json> j = Json::Parse(line);
          if (!j.ok()) {
            return absl::DataLossError(
                absl::StrCat("etcd's watch: ", j.status().message()));
          }
          const Json* result = j->Find("result");
          if (result == nullptr) {
            const Json* error = j->Find("error");
            return absl::UnavailableError(absl::StrCat(
                "etcd's watch failed: ",
                error != nullptr ? ErrorText(std::string(line)) : "no result"));
          }
          if (const Json* c = result->Find("canceled");
              c != nullptr && c->boolean()) {
            // Compacted past `revision`, or etcd cancelled it: read again.
            return absl::AbortedError("etcd cancelled the watch");
          }
          {
            absl::MutexLock lock(&mu_);
            last_event_ = absl::Now();
          }
          const Json* events = result->Find("events");
          if (events == nullptr) return absl::OkStatus();
          for (const Json& event : events->items()) {
            if (const Json* type = event.Find("type");
                type != nullptr && type->text() == "DELETE") {
              continue;  // Ring keys are never deleted by bigset.
            }
            const Json* kv = event.Find("kv");
            if (kv == nullptr) continue;
            absl::StatusOr<MembershipRecord> r = RecordOf(*kv);
            if (!r.ok()) {
              Log(true, absl::StrCat("etcd: a ring key under ", rings_prefix_,
                                     " does not decode (", r.status().message(),
                                     "); ignored"));
              continue;
            }
            std::optional<MembershipRecord> shown(std::move(*r));
            Delivered(shown);
            cb(shown);
          }
          return absl::OkStatus();
        });
    absl::MutexLock lock(&mu_);
    watch_client_.reset();
    return s;
  }

  const EtcdAuthorityOptions options_;
  const std::vector<HttpEndpoint> endpoints_;
  const std::string epoch_key_;
  const std::string rings_prefix_;
  const absl::Duration timeout_;
  const absl::Duration check_every_;
  std::atomic<size_t> preferred_{0};
  std::minstd_rand jitter_{std::random_device{}()};

  absl::Mutex mu_;
  bool watching_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<HttpClient> watch_client_ ABSL_GUARDED_BY(mu_);
  HttpEndpoint watch_endpoint_ ABSL_GUARDED_BY(mu_);
  uint64_t delivered_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_event_ ABSL_GUARDED_BY(mu_);
  std::set<HttpClient*> active_ ABSL_GUARDED_BY(mu_);
  std::thread thread_ ABSL_GUARDED_BY(mu_);
  std::thread checker_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<EtcdMembershipAuthority>>
EtcdMembershipAuthority::Create(EtcdAuthorityOptions options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("no etcd endpoint");
  }
  if (options.prefix.empty() || options.prefix[0] != '/' ||
      options.prefix.back() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd prefix \"", options.prefix,
                     "\" must start with '/' and not end with one"));
  }
  if (options.request_timeout_ms <= 0 || options.watch_check_ms <= 0) {
    return absl::InvalidArgumentError(
        "etcd request timeout and watch check interval must be > 0");
  }
  if (options.tls_ca_file.empty() &&
      (!options.tls_cert_file.empty() || !options.tls_key_file.empty())) {
    return absl::InvalidArgumentError(
        "etcd TLS: a certificate without a CA file");
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "etcd TLS: a certificate needs its key, and a key its certificate");
  }
  std::vector<HttpEndpoint> endpoints;
  for (const std::string& text : options.endpoints) {
    absl::StatusOr<HttpEndpoint> e = ParseEndpoint(text);
    if (!e.ok()) return e.status();
    e->ca_file = options.tls_ca_file;
    e->cert_file = options.tls_cert_file;
    e->key_file = options.tls_key_file;
    endpoints.push_back(std::move(*e));
  }
  return std::unique_ptr<EtcdMembershipAuthority>(new EtcdMembershipAuthority(
      std::make_unique<Impl>(std::move(options), std::move(endpoints))));
}

EtcdMembershipAuthority::EtcdMembershipAuthority(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

EtcdMembershipAuthority::~EtcdMembershipAuthority() = default;

absl::StatusOr<std::optional<MembershipRecord>>
EtcdMembershipAuthority::Latest() {
  absl::StatusOr<Impl::Latest> latest = impl_->ReadLatest();
  if (!latest.ok()) return latest.status();
  return std::move(latest->record);
}

absl::Status EtcdMembershipAuthority::Propose(const MembershipRecord& next,
                                              uint64_t expected_epoch) {
  return impl_->Propose(next, expected_epoch);
}

absl::Status EtcdMembershipAuthority::Watch(WatchCallback on_record) {
  return impl_->Watch(std::move(on_record));
}

void EtcdMembershipAuthority::Close() { impl_->Close(); }

}  // namespace bigset
