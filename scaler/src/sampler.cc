#include "tidegate/scaler/sampler.h"

#include "tidegate/common/log.h"

namespace tidegate::scaler {

SignalSampler::SignalSampler(SamplerConfig config, Fetcher fetch, const NvmlGpuUtil* nvml)
    : config_(std::move(config)), fetch_(std::move(fetch)), nvml_(nvml) {}

void SignalSampler::report_missing(const std::string& what, const std::string& detail) {
  if (!reported_.insert(what).second) return;
  log::warn("scaler.signal_missing", {{"model", config_.model}, {"signal", what}, {"detail", detail}});
}

Signals SignalSampler::sample(const SignalSource* gateway, const std::vector<Endpoint>& active, SampleDetail* out) {
  SampleDetail d;
  if (gateway) d.gateway = gateway->sample(config_.model);

  // Engines: sums of waiting/running, mean KV usage over the replicas that answered.
  if (config_.engine_metrics && !active.empty()) {
    double waiting = 0, running = 0, kv = 0;
    int n_waiting = 0, n_running = 0, n_kv = 0;
    for (const auto& e : active) {
      const auto body = fetch_("http://" + e.host + ":" + std::to_string(e.port) + config_.metrics_path);
      if (!body) {
        ++d.engines_failed;
        continue;
      }
      ++d.engines_scraped;
      const auto m = extract_engine_metrics(parse_prometheus_text(*body));
      if (m.waiting) waiting += *m.waiting, ++n_waiting;
      if (m.running) running += *m.running, ++n_running;
      if (m.kv_usage) kv += *m.kv_usage, ++n_kv;
    }
    if (d.engines_scraped > 0) {
      const std::string known = " (looked for vllm:*, tgi_*, llamacpp:*)";
      if (n_waiting) d.engine_waiting = waiting;
      else report_missing("engine.waiting", "no queue-length metric in " + config_.metrics_path + known);
      if (n_running) d.engine_running = running;
      else report_missing("engine.running", "no running-requests metric in " + config_.metrics_path + known);
      if (n_kv) d.engine_kv = kv / n_kv;
      else report_missing("engine.kv_usage", "no KV-cache usage metric in " + config_.metrics_path + known);
    } else if (d.engines_failed > 0) {
      report_missing("engine.scrape", "no replica answered " + config_.metrics_path);
    }
  }

  // GPU utilisation: DCGM exporter when configured, NVML when the driver is here.
  if (!config_.dcgm_url.empty()) {
    const auto body = fetch_(config_.dcgm_url);
    if (body) d.gpu_util = dcgm_gpu_util(parse_prometheus_text(*body), config_.gpus);
    if (d.gpu_util) d.gpu_source = "dcgm";
    else report_missing("gpu_util.dcgm", "no DCGM_FI_DEV_GPU_UTIL at " + config_.dcgm_url);
  } else if (config_.nvml && nvml_ && nvml_->available()) {
    d.gpu_util = nvml_->utilisation(config_.gpus);
    if (d.gpu_util) d.gpu_source = "nvml";
  } else if (config_.nvml) {
    report_missing("gpu_util.nvml", nvml_ ? nvml_->why_unavailable() : "NVML not loaded");
  }

  // The gateway sees requests before the engines do (admission queue); engines see
  // traffic from every gateway instance. Take the larger of the two views.
  Signals s;
  std::optional<double> gw_queue, gw_total;
  if (d.gateway) {
    gw_queue = static_cast<double>(d.gateway->queue_depth);
    gw_total = static_cast<double>(d.gateway->queue_depth + d.gateway->in_flight);
  }
  std::optional<double> engine_total;
  if (d.engine_waiting || d.engine_running) engine_total = d.engine_waiting.value_or(0) + d.engine_running.value_or(0);
  if (gw_total || engine_total) s.concurrency = std::max(gw_total.value_or(0), engine_total.value_or(0));
  if (gw_queue || d.engine_waiting) s.queue = gw_queue.value_or(0) + d.engine_waiting.value_or(0);
  s.kv_usage = d.engine_kv;
  s.gpu_util = d.gpu_util;
  if (out) *out = std::move(d);
  return s;
}

}  // namespace tidegate::scaler
