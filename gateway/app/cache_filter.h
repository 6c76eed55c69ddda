#pragma once
// Puts the semantic cache in front of the replicas: lookup before forwarding (a hit is a
// local reply), insert after a complete answer. Fails open: the cache never fails a request.
#include <cstdint>
#include <functional>
#include <memory>

#include "audit_transport.h"
#include "tidegate/cache/semantic_cache.h"
#include "tidegate/gateway/gateway.h"

namespace tidegate::app {

// What the cache made of a request, for the filters after it (the cost filter prices a hit):
// ctx.filter_state.find<CacheOutcome>(), set by pre_forward whenever the request reached the cache.
struct CacheOutcome {
  bool audit = false;  // the cache's own audit request: forwarded, never looked up or stored
  cache::CacheStatus status = cache::CacheStatus::kMiss;
  std::uint64_t entry_id = 0;  // the entry served, when status is kHit
  bool hit() const { return !audit && status == cache::CacheStatus::kHit; }
};

class CacheFilter final : public gateway::RequestFilter {
 public:
  // Prices a hit (the cost filter's job) early enough for a streamed hit to carry the figure
  // on its usage chunk, as a streamed miss does; empty when costs are off.
  using HitPricer = std::function<double(gateway::RequestContext&)>;

  // `audit_mark`: requests it marks are the cache's own audits (audit_transport.h): forwarded
  // without a lookup and never stored. Served hits are offered to the cache's audits.
  explicit CacheFilter(std::shared_ptr<cache::SemanticCache> cache, HitPricer price_hit = {},
                       std::shared_ptr<const AuditMark> audit_mark = nullptr)
      : cache_(std::move(cache)), price_hit_(std::move(price_hit)), audit_mark_(std::move(audit_mark)) {}

  void pre_forward(const std::shared_ptr<gateway::RequestContext>& ctx, Done done) override;
  bool reads_request_headers() const override { return true; }  // Cache-Control, x-tidegate-cache*
  void on_complete(const gateway::RequestContext& ctx) override;

  // The access log's field for the outcome ("hit", "miss", "bypass", "audit", ...).
  static constexpr const char* kStatusField = "cache.status";

 private:
  std::shared_ptr<cache::SemanticCache> cache_;
  HitPricer price_hit_;
  std::shared_ptr<const AuditMark> audit_mark_;
};

}  // namespace tidegate::app
