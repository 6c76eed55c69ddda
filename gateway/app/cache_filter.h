#pragma once
// Puts the semantic cache in front of the replicas: lookup before forwarding (a hit is a
// local reply), insert after a complete answer. Fails open: the cache never fails a request.
#include <memory>

#include "tidegate/cache/semantic_cache.h"
#include "tidegate/gateway/gateway.h"

namespace tidegate::app {

class CacheFilter final : public gateway::RequestFilter {
 public:
  explicit CacheFilter(std::shared_ptr<cache::SemanticCache> cache) : cache_(std::move(cache)) {}

  void pre_forward(const std::shared_ptr<gateway::RequestContext>& ctx, Done done) override;
  void on_complete(const gateway::RequestContext& ctx) override;

  // Attribute names other filters read (the cost filter prices a hit from these).
  static constexpr const char* kStatus = "cache.status";
  static constexpr const char* kPromptTokens = "cache.prompt_tokens";
  static constexpr const char* kCompletionTokens = "cache.completion_tokens";

 private:
  std::shared_ptr<cache::SemanticCache> cache_;
};

}  // namespace tidegate::app
