#include "metrics.h"

#include "openai.h"

#include <cstdio>

namespace tidegate::sim {

void SimMetrics::observe_ttft(double seconds) {
  std::size_t i = 0;
  while (i < kTtftBuckets.size() && seconds > kTtftBuckets[i]) ++i;
  ttft_counts_[i].fetch_add(1, std::memory_order_relaxed);
  ttft_sum_us_.fetch_add(static_cast<std::uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

std::string SimMetrics::render(const std::string& model, const Gauges& g, const PrefixCacheStats& prefix) const {
  const std::string label = "{model_name=" + json_quote(model) + "}";
  std::string s;
  char buf[64];
  auto line = [&](const char* name, const char* type, const char* help, const std::string& value) {
    s.append("# HELP ").append(name).append(" ").append(help).append("\n# TYPE ").append(name).append(" ");
    s.append(type).append("\n").append(name).append(label).append(" ").append(value).append("\n");
  };
  auto num = [&](double v) {
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  line("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", num(g.running));
  line("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", num(g.waiting));
  line("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", num(g.kv_usage));
  // Old name kept by vLLM < 0.10; dashboards still read it.
  line("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage.", num(g.kv_usage));
  line("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
       num(static_cast<double>(prompt_tokens_.load(std::memory_order_relaxed))));
  line("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
       num(static_cast<double>(generation_tokens_.load(std::memory_order_relaxed))));
  line("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.",
       num(static_cast<double>(prefix.queries_tokens)));
  line("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.",
       num(static_cast<double>(prefix.hits_tokens)));

  s += "# HELP vllm:request_success_total Count of successfully processed requests.\n"
       "# TYPE vllm:request_success_total counter\n";
  s += "vllm:request_success_total{finished_reason=\"stop\",model_name=" + json_quote(model) + "} " +
       num(static_cast<double>(success_.load(std::memory_order_relaxed))) + "\n";

  s += "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.\n"
       "# TYPE vllm:time_to_first_token_seconds histogram\n";
  std::uint64_t cumulative = 0;
  const std::string base = "vllm:time_to_first_token_seconds_bucket{le=\"";
  for (std::size_t i = 0; i < kTtftBuckets.size(); ++i) {
    cumulative += ttft_counts_[i].load(std::memory_order_relaxed);
    std::snprintf(buf, sizeof buf, "%g", kTtftBuckets[i]);
    s += base + buf + "\",model_name=" + json_quote(model) + "} " + std::to_string(cumulative) + "\n";
  }
  cumulative += ttft_counts_.back().load(std::memory_order_relaxed);
  s += base + "+Inf\",model_name=" + json_quote(model) + "} " + std::to_string(cumulative) + "\n";
  s += "vllm:time_to_first_token_seconds_sum" + label + " " +
       num(static_cast<double>(ttft_sum_us_.load(std::memory_order_relaxed)) / 1e6) + "\n";
  s += "vllm:time_to_first_token_seconds_count" + label + " " + std::to_string(cumulative) + "\n";
  return s;
}

}  // namespace tidegate::sim
