#include "audit_transport.h"

#include <random>

#include "tidegate/cost/accounting.h"

namespace tidegate::app {

AuditMark::AuditMark() {
  std::random_device rd;
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) secret_.push_back(kHex[rd() & 0xf]);
}

bool AuditMark::marks(const gateway::RequestContext& ctx) const {
  const auto it = ctx.request_headers.find(kHeader);
  if (it == ctx.request_headers.end() || it->second.size() != secret_.size()) return false;
  unsigned diff = 0;  // constant time: the comparison says nothing about how much matched
  for (std::size_t i = 0; i < secret_.size(); ++i) diff |= static_cast<unsigned>(it->second[i] ^ secret_[i]);
  return diff == 0;
}

std::shared_ptr<const gateway::GatewayConfig> with_audit_key(std::shared_ptr<const gateway::GatewayConfig> config,
                                                            const std::string& key) {
  // Open mode stays open: adding a key there would turn authentication on for every client.
  if (config->api_keys.empty()) return config;
  auto c = std::make_shared<gateway::GatewayConfig>(*config);
  c->api_keys.push_back(gateway::ApiKey{"tidegate-audit", key, cost::kAuditTenant, {}});
  return c;
}

std::string self_url(const gateway::GatewayConfig& config, std::uint16_t port) {
  std::string host = config.listen_host;
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(port);
}

AuditTransport::AuditTransport(std::string base_url, const AuditMark& mark, std::string api_key, std::size_t threads)
    : base_url_(std::move(base_url)), client_([] {
        common::HttpClientOptions o;
        o.user_agent = "tidegate-audit";
        o.schemes = common::UrlSchemes::kHttp;
        return o;
      }()) {
  headers_ = {{"Content-Type", "application/json"}, {AuditMark::kHeader, mark.secret()}};
  if (!api_key.empty()) headers_.emplace_back("Authorization", "Bearer " + api_key);
  for (std::size_t i = 0; i < std::max<std::size_t>(1, threads); ++i) threads_.emplace_back([this] { run(); });
}

AuditTransport::~AuditTransport() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void AuditTransport::fetch(const cache::AuditRequest& request, double timeout_s,
                           std::function<void(cache::AuditResponse)> done) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      queue_.push_back(Job{request, timeout_s, std::move(done)});
      cv_.notify_one();
      return;
    }
  }
  cache::AuditResponse r;
  r.error = "shutting down";
  done(std::move(r));
}

void AuditTransport::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      if (stopping_) {
        lock.unlock();
        cache::AuditResponse r;
        r.error = "shutting down";
        job.done(std::move(r));
        continue;
      }
    }
    job.done(send(job));
  }
}

cache::AuditResponse AuditTransport::send(const Job& job) {
  using Clock = common::HttpClient::Clock;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(job.timeout_s));
  auto reply = client_.request("POST", base_url_ + job.request.path, headers_, job.request.body, deadline);
  cache::AuditResponse r;
  if (!reply.ok()) {
    r.outcome = Clock::now() >= deadline ? cache::AuditResponse::Outcome::kTimeout : cache::AuditResponse::Outcome::kError;
    r.error = std::move(reply.error);
    return r;
  }
  r.outcome = cache::AuditResponse::Outcome::kAnswered;
  r.status = reply.status;
  r.body = std::move(reply.body);
  return r;
}

}  // namespace tidegate::app
