#pragma once
// The `cost:` section, parsed once and shared read-only (shared_ptr<const CostConfig>).
//
// Default attribution weights: w_prefill = 1, w_decode = 4. A prefill token is processed in
// parallel with the rest of its prompt (compute-bound matmuls), a decode token needs one
// memory-bound pass over the weights and KV cache shared only with the current batch. Published
// vLLM throughputs for 7-8B models on one A100/H100 put saturated prefill at roughly 8-15k
// tokens/s and saturated decode at roughly 2-3.5k tokens/s, i.e. 3-5x more GPU time per decode
// token; paid-API price lists agree (output/input price 4x for gpt-4o, 5x for claude-3.5).
// We take 4 as the middle of that range; operators with their own measurements override it.
#include <array>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tidegate/common/replica_state.h"

namespace tidegate::cost {

// USD per second for each ReplicaState (indexed by the enum; kStopped is always 0).
using StateRates = std::array<double, kReplicaStateCount>;

struct ReplicaClass {
  std::string name;
  double usd_per_hour = 0;
  StateRates usd_per_second{};  // resolved from fractions or explicit per-state prices
};

// A model served by a paid API upstream: priced per token, no replica time.
struct ApiPrice {
  double input_usd_per_1m = 0;
  double output_usd_per_1m = 0;
};

enum class BudgetPeriod { kDay, kMonth };
enum class ScopeKind { kKey, kTenant, kTag };

struct BudgetRule {
  ScopeKind kind = ScopeKind::kTenant;
  std::string tag_key;        // kTag only
  std::string match;          // name/value, or "*" for "each one separately"
  BudgetPeriod period = BudgetPeriod::kDay;
  double soft_usd = 0;        // 0: no soft alert
  double hard_usd = 0;        // 0: no hard limit
};

struct TagPolicy {
  std::vector<std::string> labels;                        // tag keys that become metric labels
  std::map<std::string, std::set<std::string>> values;    // fixed value allow-list per key
  std::size_t max_values = 20;  // keys without a fixed list admit the first N values seen
};

struct CostConfig {
  std::map<std::string, ReplicaClass> replica_classes;
  std::map<std::string, std::string> model_classes;  // model -> class when the reporter gives none
  std::map<std::string, ApiPrice> api_models;
  double w_prefill = 1.0;
  double w_decode = 4.0;
  // A prompt token the engine found in its prefix cache (cost/README.md: derivation).
  double w_cached_prompt = 0.1;
  double cache_lookup_usd = 0.00001;  // gateway compute for one cache hit (embedding + search)
  double savings_ewma_alpha = 0.1;    // weight of the newest finished request
  TagPolicy tags;
  std::vector<BudgetRule> budgets;
  std::string webhook_url;            // http://host:port/path; empty: no webhook
  double webhook_timeout_s = 2.0;
  std::string data_dir;               // empty: spend is not persisted
  double bucket_s = 60.0;             // report granularity (also the burst window for hints)
  double horizon_s = 7 * 86400.0;     // how far back reports reach
  double idle_hint_fraction = 0.3;    // hint when idle > this share of active time
  double live_step_s = 5.0;           // dashboard resolution
  int live_points = 120;              // dashboard window = step * points

  bool has_class(const std::string& name) const { return replica_classes.count(name) != 0; }
  // Weighted token work, the unit requests share replica time by.
  // `cached_prompt_tokens` are part of `prompt_tokens`: priced at w_cached_prompt instead of w_prefill.
  double work(double prompt_tokens, double completion_tokens, double cached_prompt_tokens = 0) const {
    const double cached = cached_prompt_tokens < 0 ? 0 : cached_prompt_tokens > prompt_tokens ? prompt_tokens : cached_prompt_tokens;
    return (prompt_tokens - cached) * w_prefill + cached * w_cached_prompt + completion_tokens * w_decode;
  }
};

std::string to_string(BudgetPeriod p);
std::string scope_name(const BudgetRule& r);  // "tenant:acme", "tag:team=*", ...

}  // namespace tidegate::cost
