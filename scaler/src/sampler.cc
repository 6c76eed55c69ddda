#include "tidegate/scaler/sampler.h"

#include <algorithm>

#include "tidegate/common/log.h"

namespace tidegate::scaler {

SignalSampler::SignalSampler(SamplerConfig config, Fetcher fetch, const NvmlGpuUtil* nvml)
    : config_(std::move(config)), fetch_(std::move(fetch)), nvml_(nvml) {}

void SignalSampler::report_missing(const std::string& what, const std::string& detail) {
  if (!reported_.insert(what).second) return;
  log::warn("scaler.signal_missing", {{"model", config_.model}, {"signal", what}, {"detail", detail}});
}

void SignalSampler::gateway_work(const GatewaySignals& g, Signals& s) {
  // Counters restart with the gateway (a reload that recreated the pool): no difference then.
  if (last_gateway_ && g.arrivals_total >= last_gateway_->arrivals_total && g.ttft_total >= last_gateway_->ttft_total) {
    const auto& p = *last_gateway_;
    s.arrivals = static_cast<double>(g.arrivals_total - p.arrivals_total);
    s.arrival_prompt_tokens = static_cast<double>(g.arrival_prompt_tokens_total - p.arrival_prompt_tokens_total);
    std::array<double, 24> sizes{};
    for (std::size_t i = 0; i < sizes.size(); ++i)
      sizes[i] = static_cast<double>(g.prompt_sizes_total[i] - std::min(g.prompt_sizes_total[i], p.prompt_sizes_total[i]));
    s.arrival_prompt_sizes = sizes;
    // First tokens within the SLO, interpolating inside the bucket that holds it.
    const double total = static_cast<double>(g.ttft_total - p.ttft_total);
    if (total > 0) {
      auto within = [&](std::size_t i) {
        return static_cast<double>(g.ttft_le_total[i] - std::min(g.ttft_le_total[i], p.ttft_le_total[i]));
      };
      const double slo = config_.ttft_slo_s;
      double met = 0, lo = 0, lo_count = 0;
      for (std::size_t i = 0; i < kTtftBounds.size(); ++i) {
        const double hi = kTtftBounds[i], hi_count = within(i);
        if (slo <= hi) {
          met = lo_count + (hi_count - lo_count) * (slo - lo) / (hi - lo);
          break;
        }
        lo = hi, lo_count = hi_count, met = hi_count;
      }
      s.ttft_met = std::min(met, total);
      s.ttft_total = total;
    }
  }
  s.prefill_backlog_tokens = static_cast<double>(g.queued_prompt_tokens);
  s.in_flight = static_cast<double>(g.in_flight);
  last_gateway_ = g;
}

Signals SignalSampler::sample(const SignalSource* gateway, const std::vector<Endpoint>& active, SampleDetail* out) {
  SampleDetail d;
  if (gateway) d.gateway = gateway->sample(config_.model);

  // Engines: sums of waiting/running, mean KV usage over the replicas that answered.
  if (config_.engine_metrics && !active.empty()) {
    double waiting = 0, running = 0, kv = 0, queries = 0, hits = 0, rate = 0;
    int n_waiting = 0, n_running = 0, n_kv = 0, n_counters = 0, n_rate = 0;
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
      if (m.prefix_queries_total && m.prefix_hits_total)
        queries += *m.prefix_queries_total, hits += *m.prefix_hits_total, ++n_counters;
      else if (m.prefix_hit_rate)
        rate += *m.prefix_hit_rate, ++n_rate;
    }
    // Prefix caching: counters differenced between samples (a replica joining or leaving makes
    // the sums jump: such a sample is skipped), else the engines' own hit-rate gauges.
    if (n_counters > 0 && n_counters == d.engines_scraped) {
      if (last_prefix_ && queries > last_prefix_->first && hits >= last_prefix_->second &&
          hits - last_prefix_->second <= queries - last_prefix_->first)
        d.prefix_hit_ratio = (hits - last_prefix_->second) / (queries - last_prefix_->first);
      last_prefix_ = std::pair{queries, hits};
    } else if (n_rate > 0) {
      d.prefix_hit_ratio = std::clamp(rate / n_rate, 0.0, 1.0);
    } else if (d.engines_scraped > 0) {
      report_missing("engine.prefix_cache", "no prefix-cache metric (vllm:prefix_cache_queries_total/hits_total, "
                                            "vllm:gpu_prefix_cache_hit_rate, sglang:cache_hit_rate): no prompt is taken as cached");
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
  if (d.gateway) gateway_work(*d.gateway, s);
  s.prefix_hit_ratio = d.prefix_hit_ratio;
  if (d.engine_kv && config_.kv_tokens_per_replica && d.engines_scraped > 0)
    s.kv_used_tokens = *d.engine_kv * *config_.kv_tokens_per_replica * d.engines_scraped;
  if (out) *out = std::move(d);
  return s;
}

}  // namespace tidegate::scaler
