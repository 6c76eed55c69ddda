#pragma once
// vLLM-named Prometheus metrics, so that the scaler and dashboards read the simulator exactly
// as they would read a real vLLM server. Lock-free counters; rendered by hand as text format.
#include "tidegate/sim/timing_model.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace tidegate::sim {

class SimMetrics final {
 public:
  void add_prompt_tokens(std::int64_t n) { prompt_tokens_.fetch_add(n, std::memory_order_relaxed); }
  void add_generation_tokens(std::int64_t n) { generation_tokens_.fetch_add(n, std::memory_order_relaxed); }
  void observe_ttft(double seconds);
  void count_request(bool ok) { (ok ? success_ : failed_).fetch_add(1, std::memory_order_relaxed); }

  std::string render(const std::string& model, const Gauges& g, const PrefixCacheStats& prefix) const;

  // vLLM's buckets for time_to_first_token_seconds.
  static constexpr std::array<double, 18> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25,
                                                          0.5,   0.75,  1.0,  2.5,  5.0,  7.5,  10.0, 20.0, 40.0};

 private:
  std::atomic<std::int64_t> prompt_tokens_{0};
  std::atomic<std::int64_t> generation_tokens_{0};
  std::atomic<std::int64_t> success_{0};
  std::atomic<std::int64_t> failed_{0};
  std::array<std::atomic<std::uint64_t>, kTtftBuckets.size() + 1> ttft_counts_{};  // last = +Inf only
  std::atomic<std::uint64_t> ttft_sum_us_{0};
};

}  // namespace tidegate::sim
