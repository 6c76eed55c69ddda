#pragma once
// How the cache's audits reach the model: each audit is sent to this gateway itself, on
// loopback, so it takes the same path as a client's request (balancer, per-replica caps,
// admission queue, retries, health) and the cost filter prices it. An audit carries a secret
// drawn at start (x-tidegate-audit); the cache filter lets such a request through without a
// lookup, and the cost filter charges it as audit cost, outside every budget. Clients cannot
// forge it: the secret never leaves the process.
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tidegate/cache/audit.h"
#include "tidegate/common/http_client.h"
#include "tidegate/gateway/gateway.h"

namespace tidegate::app {

// The secret that marks an audit request, and the check both filters make.
class AuditMark final {
 public:
  static constexpr const char* kHeader = "x-tidegate-audit";
  AuditMark();  // draws the secret
  const std::string& secret() const { return secret_; }
  bool marks(const gateway::RequestContext& ctx) const;

 private:
  std::string secret_;
};

// The key an audit presents when the gateway has API keys (added to the running config by
// with_audit_key; never written anywhere). Its tenant is cost::kAuditTenant.
std::shared_ptr<const gateway::GatewayConfig> with_audit_key(std::shared_ptr<const gateway::GatewayConfig> config,
                                                            const std::string& key);

// A few threads that send audits with the blocking HTTP client; as many as the cache lets be
// in flight, so an audit never waits here for a thread.
class AuditTransport final {
 public:
  // `base_url`: http://127.0.0.1:PORT of this gateway; `api_key` empty in open mode.
  AuditTransport(std::string base_url, const AuditMark& mark, std::string api_key, std::size_t threads);
  ~AuditTransport();  // audits still queued are answered as errors ("shutting down")
  AuditTransport(const AuditTransport&) = delete;
  AuditTransport& operator=(const AuditTransport&) = delete;

  void fetch(const cache::AuditRequest& request, double timeout_s, std::function<void(cache::AuditResponse)> done);

 private:
  struct Job {
    cache::AuditRequest request;
    double timeout_s;
    std::function<void(cache::AuditResponse)> done;
  };
  void run();
  cache::AuditResponse send(const Job& job);

  const std::string base_url_;
  common::HttpClient::Headers headers_;
  common::HttpClient client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// http://HOST:PORT for reaching the gateway from inside: a wildcard listen address becomes
// loopback.
std::string self_url(const gateway::GatewayConfig& config, std::uint16_t port);

}  // namespace tidegate::app
