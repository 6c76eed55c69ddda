#pragma once
// Prometheus metrics of the cache, all prefixed tidegate_cache_. Reasons are a fixed, small
// set of strings (policy.cc and semantic_cache_impl.cc), so label cardinality stays bounded.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <mutex>
#include <string>
#include <unordered_map>

#include "tidegate/cache/semantic_cache.h"

namespace tidegate::cache {

class CacheMetrics final {
 public:
  explicit CacheMetrics(prometheus::Registry& registry);

  void lookup(CacheStatus status, const std::string& reason, const std::string& model);
  void evicted(std::string_view reason);
  void persist_error(std::string_view op);
  // tidegate_cache_tier_total{tier, outcome}: what each tier of a lookup decided (issue 19).
  // tier: exact | candidates | guard | verifier | cosine; outcome: hit | miss | none | rejected |
  // error | timeout | unavailable (a fixed set, see semantic_cache_impl.cc).
  void tier(std::string_view tier, std::string_view outcome);

  prometheus::Histogram& hit_similarity;
  prometheus::Histogram& embed_seconds;
  prometheus::Histogram& search_seconds;
  prometheus::Histogram& verify_seconds;
  prometheus::Histogram& hit_probability;
  prometheus::Gauge& entries;
  prometheus::Gauge& bytes;
  prometheus::Counter& inserts;
  prometheus::Counter& prompt_tokens_saved;
  prometheus::Counter& completion_tokens_saved;
  prometheus::Counter& insert_skipped;

 private:
  prometheus::Family<prometheus::Counter>& lookups_;
  prometheus::Family<prometheus::Counter>& evictions_;
  prometheus::Family<prometheus::Counter>& persist_errors_;
  prometheus::Family<prometheus::Counter>& tiers_;
  std::mutex mu_;
  std::unordered_map<std::string, prometheus::Counter*> lookup_cache_;
};

}  // namespace tidegate::cache
