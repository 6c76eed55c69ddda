#pragma once
// Turns the gateway's view plus the engines' /metrics and GPU utilisation into the policy's
// Signals for one model pool. Fetching is injected so tests need no sockets; the live
// scaler passes an HTTP getter. A missing metric is logged once and the rest goes on.
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tidegate/scaler/policy.h"
#include "tidegate/scaler/routing.h"
#include "tidegate/scaler/signals.h"

namespace tidegate::scaler {

struct SamplerConfig {
  std::string model;
  bool engine_metrics = true;
  std::string metrics_path = "/metrics";
  std::string dcgm_url;       // e.g. http://dcgm-exporter:9400/metrics; empty = off
  std::vector<int> gpus;      // devices this pool uses (DCGM "gpu" label, NVML index); empty = all
  bool nvml = true;           // try NVML when no DCGM URL is set
  // From the pool's policy: the TTFT objective the gateway's first tokens are counted
  // against, and a replica's KV capacity (engines report usage as a fraction).
  double ttft_slo_s = 1.0;
  std::optional<double> kv_tokens_per_replica;
};

// Returns the body of GET url, or nullopt (unreachable, non-200).
using Fetcher = std::function<std::optional<std::string>(const std::string& url)>;

struct SampleDetail {
  std::optional<GatewaySignals> gateway;
  int engines_scraped = 0;
  int engines_failed = 0;
  std::optional<double> engine_waiting, engine_running, engine_kv;
  std::optional<double> gpu_util;
  std::string gpu_source;  // "dcgm", "nvml" or ""
  std::optional<double> prefix_hit_ratio;
};

class SignalSampler final {
 public:
  SignalSampler(SamplerConfig config, Fetcher fetch, const NvmlGpuUtil* nvml = nullptr);

  // `gateway` may be null (no gateway attached); `active` are the routed replicas.
  Signals sample(const SignalSource* gateway, const std::vector<Endpoint>& active, SampleDetail* detail = nullptr);

  // Signals reported missing so far (each logged once).
  const std::set<std::string>& missing() const { return reported_; }

 private:
  void report_missing(const std::string& what, const std::string& detail);
  void gateway_work(const GatewaySignals& now, Signals& out);

  SamplerConfig config_;
  std::optional<GatewaySignals> last_gateway_;       // previous sample: counters are differenced
  std::optional<std::pair<double, double>> last_prefix_;  // (queries, hits) summed over engines
  Fetcher fetch_;
  const NvmlGpuUtil* nvml_;
  std::set<std::string> reported_;
};

}  // namespace tidegate::scaler
