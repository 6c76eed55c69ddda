#include "cache_metrics.h"

namespace tidegate::cache {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

prometheus::Histogram& histogram(prometheus::Registry& r, const std::string& name, const std::string& help,
                                 Histogram::BucketBoundaries buckets) {
  return BuildHistogram().Name(name).Help(help).Register(r).Add({}, std::move(buckets));
}

const Histogram::BucketBoundaries kLatency = {0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005,
                                              0.01,   0.025,   0.05,   0.1,   0.25,  0.5,   1.0};

}  // namespace

CacheMetrics::CacheMetrics(prometheus::Registry& r)
    : hit_similarity(histogram(r, "tidegate_cache_hit_similarity", "Cosine similarity of served cache hits",
                               {0.8, 0.85, 0.88, 0.9, 0.92, 0.94, 0.96, 0.98, 0.99, 0.999})),
      embed_seconds(histogram(r, "tidegate_cache_embed_seconds", "Time to embed a lookup's text", kLatency)),
      search_seconds(histogram(r, "tidegate_cache_search_seconds", "Time to search the scope's index", kLatency)),
      verify_seconds(histogram(r, "tidegate_cache_verify_seconds",
                               "Time of the pair verifier's call on a lookup's candidates", kLatency)),
      hit_probability(histogram(r, "tidegate_cache_hit_probability", "Pair verifier probability of served hits",
                                {0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999})),
      entries(BuildGauge().Name("tidegate_cache_entries").Help("Entries in the cache").Register(r).Add({})),
      bytes(BuildGauge().Name("tidegate_cache_bytes").Help("Accounted bytes of cache entries").Register(r).Add({})),
      inserts(BuildCounter().Name("tidegate_cache_inserts_total").Help("Answers stored").Register(r).Add({})),
      prompt_tokens_saved(BuildCounter()
                              .Name("tidegate_cache_tokens_saved_total")
                              .Help("Tokens not sent to a model thanks to cache hits")
                              .Register(r)
                              .Add({{"kind", "prompt"}})),
      completion_tokens_saved(
          BuildCounter().Name("tidegate_cache_tokens_saved_total").Register(r).Add({{"kind", "completion"}})),
      insert_skipped(BuildCounter()
                         .Name("tidegate_cache_insert_skipped_total")
                         .Help("Answers not stored (incomplete, empty, or embedding failed)")
                         .Register(r)
                         .Add({})),
      lookups_(BuildCounter()
                   .Name("tidegate_cache_lookups_total")
                   .Help("Cache decisions per request, by result, reason and model")
                   .Register(r)),
      evictions_(BuildCounter().Name("tidegate_cache_evictions_total").Help("Entries removed, by reason").Register(r)),
      persist_errors_(BuildCounter()
                          .Name("tidegate_cache_persist_errors_total")
                          .Help("Failed writes to the cache data directory")
                          .Register(r)),
      tiers_(BuildCounter()
                 .Name("tidegate_cache_tier_total")
                 .Help("Decisions of a lookup's tiers (exact, candidates, guard, verifier, cosine), by outcome")
                 .Register(r)) {}

void CacheMetrics::lookup(CacheStatus status, const std::string& reason, const std::string& model) {
  const auto key = std::string(to_string(status)) + "|" + reason + "|" + model;
  prometheus::Counter* c;
  {
    std::lock_guard lock(mu_);
    auto& slot = lookup_cache_[key];
    if (!slot)
      slot = &lookups_.Add({{"result", std::string(to_string(status))}, {"reason", reason}, {"model", model}});
    c = slot;
  }
  c->Increment();
}

void CacheMetrics::evicted(std::string_view reason) { evictions_.Add({{"reason", std::string(reason)}}).Increment(); }

void CacheMetrics::tier(std::string_view tier, std::string_view outcome) {
  tiers_.Add({{"tier", std::string(tier)}, {"outcome", std::string(outcome)}}).Increment();
}

void CacheMetrics::persist_error(std::string_view op) {
  persist_errors_.Add({{"op", std::string(op)}}).Increment();
}

}  // namespace tidegate::cache
