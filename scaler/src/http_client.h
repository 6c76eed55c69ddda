#pragma once
// The scaler's HTTP calls (health probes, /metrics scrapes, engine sleep and wake, the
// Kubernetes API) on the shared blocking client: one deadline over the whole exchange and a
// fresh connection each time, as the callers are spread over replicas that come and go.
// Never throws: a transport failure is Result::error.
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "tidegate/common/http_client.h"

namespace tidegate::scaler::http {

using TlsOptions = common::TlsOptions;
using Result = common::HttpResponse;

inline Result request(const std::string& method, const std::string& url,
                      const std::vector<std::pair<std::string, std::string>>& headers, const std::string& body,
                      double timeout_s, const TlsOptions& tls = {}) {
  common::HttpClientOptions options;
  options.user_agent = "tidegate-scaler";
  options.max_idle_per_origin = 0;
  options.tls = tls;
  common::HttpClient client(std::move(options));
  using Clock = common::HttpClient::Clock;
  const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  return client.request(method, url, headers, body, Clock::now() + timeout);
}

inline Result get(const std::string& url, double timeout_s) { return request("GET", url, {}, {}, timeout_s); }

}  // namespace tidegate::scaler::http
