#pragma once
// What the scaler needs from the gateway, as interfaces the gateway implements, so the
// dependency points one way (gateway -> scaler) and the scaler is testable with fakes.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "tidegate/common/replica_state.h"

namespace tidegate::scaler {

struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
};

// The live routing set of one gateway. Calls may come from any thread.
class RoutingTarget {
 public:
  virtual ~RoutingTarget() = default;
  // Starts routing `model` traffic to the replica (warm -> active).
  virtual void activate(const std::string& model, const std::string& replica_id, const Endpoint& endpoint) = 0;
  // Stops routing new requests to it; `on_drained` runs once in-flight requests reach zero
  // (immediately if none), from any thread. Requests already queued go to other replicas.
  virtual void drain(const std::string& model, const std::string& replica_id, std::function<void()> on_drained) = 0;
  // Forgets the replica (after drain, or when it died).
  virtual void remove(const std::string& model, const std::string& replica_id) = 0;
};

// Power-of-two prompt-size buckets: bucket i holds [2^(i+3), 2^(i+4)) tokens (the first also
// everything below, the last everything above); its representative size is 2^(i+3.5).
struct PromptSizes {
  static constexpr int kBuckets = 24;
  static int bucket_of(double tokens) {
    const int b = tokens < 16 ? 0 : static_cast<int>(std::floor(std::log2(tokens))) - 3;
    return b < 0 ? 0 : b >= kBuckets ? kBuckets - 1 : b;
  }
  static double size_of(int bucket) { return std::exp2(bucket + 3.5); }
};

// Bounds (seconds) of the gateway's time-to-first-token counts, cumulative ("le") as in a
// Prometheus histogram; the sampler reads attainment at any SLO between them.
inline constexpr std::array<double, 20> kTtftBounds = {0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1,  1.5, 2,  3,
                                                       5,    7.5, 10,  15,  20,  30,   45, 60,  120, 300};

// The gateway's view of demand for one model, sampled about once a second.
struct GatewaySignals {
  std::size_t queue_depth = 0;      // requests waiting in the admission queue
  double queue_wait_p90_s = 0;      // recent queue wait
  double oldest_wait_s = 0;         // age of the oldest queued request
  std::size_t in_flight = 0;        // requests being served by replicas
  std::map<std::string, std::size_t> in_flight_by_replica;
  std::map<std::string, bool> replica_healthy;  // passive+active health as the gateway sees it
  // Work, cumulative since the pool was created (the sampler takes differences). Prompt
  // tokens are estimated from the request body (a quarter of its bytes): the gateway does not
  // tokenize, and the engines only count a prompt once it is admitted.
  std::uint64_t arrivals_total = 0;
  std::uint64_t arrival_prompt_tokens_total = 0;
  std::array<std::uint64_t, 24> prompt_sizes_total{};  // scaler::PromptSizes buckets
  std::uint64_t queued_prompt_tokens = 0;              // of the requests in the admission queue
  // First tokens of streamed answers (and requests turned away for want of capacity, which
  // count as misses), cumulative: ttft_le_total[i] = how many came within kTtftBounds[i].
  std::uint64_t ttft_total = 0;
  std::array<std::uint64_t, kTtftBounds.size()> ttft_le_total{};
};

class SignalSource {
 public:
  virtual ~SignalSource() = default;
  virtual GatewaySignals sample(const std::string& model) const = 0;
};

}  // namespace tidegate::scaler
