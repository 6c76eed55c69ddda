#pragma once
// Turns the gateway's view plus the engines' /metrics and GPU utilisation into the policy's
// Signals for one model pool. Fetching is injected so tests need no sockets; the live
// scaler passes an HTTP getter. A missing metric never stops the rest; it is tracked while it
// lasts (GET /admin/scaler, tidegate_scaler_signal_missing) and logged when first seen. One
// that a configured key depends on (targets.kv_usage on an engine without a KV metric) is
// logged again every `missing_warn_every_s`: that key does nothing until the signal is back.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
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
  // Policy signals ("concurrency", "queue", "gpu_util", "kv_usage") -> the config keys that
  // use them (e.g. "policy.targets.kv_usage"). The Scaler fills it from the pool's policy.
  std::map<std::string, std::vector<std::string>> needed_by;
  double missing_warn_every_s = 300;
};

// A signal absent from the samples where it should have been.
struct MissingSignal {
  std::string detail;                  // what was looked for, and what follows
  std::vector<std::string> needed_by;  // config keys without effect while it lasts
  double since = 0;                    // first sample it was missing in (the caller's clock)
  double last = 0;                     // latest one
  std::uint64_t samples = 0;           // samples it was missing in
  std::uint64_t warnings = 0;          // times logged
  double last_warned = 0;
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
  // Per routed replica ("host:port"): its engine's prefix-cache hit ratio since the previous
  // sample that had enough prompt tokens to tell (cached / queried tokens). Replicas whose
  // engine exports no prefix counters are absent.
  std::map<std::string, double> prefix_hit_ratio_by_replica;
};

class SignalSampler final {
 public:
  SignalSampler(SamplerConfig config, Fetcher fetch, const NvmlGpuUtil* nvml = nullptr);

  // `now`: seconds on the caller's clock (paces the repeated warnings). `gateway` may be null
  // (no gateway attached); `active` are the routed replicas.
  Signals sample(double now, const SignalSource* gateway, const std::vector<Endpoint>& active,
                 SampleDetail* detail = nullptr);

  // Signals missing now, by name: "engine.waiting", "engine.running", "engine.kv_usage",
  // "engine.prefix_cache", "engine.scrape", "gpu_util.dcgm", "gpu_util.nvml", and the policy
  // signals of `needed_by` ("kv_usage", ...). A signal that comes back is dropped (and logged).
  const std::map<std::string, MissingSignal>& missing() const { return missing_; }

 private:
  // One sample's findings: absent (with why) or present; a name in neither is left as it was
  // (e.g. no replica to scrape says nothing about the engines' metrics).
  using Findings = std::map<std::string, std::optional<std::string>>;
  void update_missing(double now, const Findings& findings);
  void engine_signals(const std::vector<Endpoint>& active, SampleDetail& d, Findings& f);
  void gateway_work(const GatewaySignals& now, Signals& out);

  SamplerConfig config_;
  std::optional<GatewaySignals> last_gateway_;       // previous sample: counters are differenced
  std::optional<std::pair<double, double>> last_prefix_;  // (queries, hits) summed over engines
  std::string prefix_replicas_;                           // ... of these replicas
  std::map<std::string, std::pair<double, double>> replica_prefix_;  // per replica: (queries, hits) last taken
  std::map<std::string, double> replica_prefix_ratio_;               // ... and the ratio they gave
  Fetcher fetch_;
  const NvmlGpuUtil* nvml_;
  std::map<std::string, MissingSignal> missing_;
};

}  // namespace tidegate::scaler
