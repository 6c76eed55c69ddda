#include "tidegate/scaler/sampler.h"

#include <algorithm>
#include <set>

#include "tidegate/common/log.h"

namespace tidegate::scaler {

namespace {

const char* const kWaitingNames = "vllm:num_requests_waiting, sglang:num_queue_reqs, tgi_queue_size, llamacpp:requests_deferred";
const char* const kRunningNames =
    "vllm:num_requests_running, sglang:num_running_reqs, tgi_batch_current_size, llamacpp:requests_processing";

// What an engine that was recognised lacks, in its own terms, and what goes without it.
std::string kv_detail(const std::set<std::string>& engines, const std::string& path, bool work_model_kv) {
  std::string d = "no KV-cache usage metric in " + path + " (looked for vllm:kv_cache_usage_perc, sglang:token_usage)";
  if (engines.count("llamacpp")) d += "; llama.cpp's llama-server exports none (kv_cache_usage_ratio was removed)";
  if (engines.count("tgi")) d += "; TGI exports none";
  if (work_model_kv) d += "; the work model's KV bound (policy.capacity.kv_tokens) is not applied";
  return d;
}

std::optional<double> policy_signal(const Signals& s, const std::string& name) {
  if (name == "concurrency") return s.concurrency;
  if (name == "queue") return s.queue;
  if (name == "gpu_util") return s.gpu_util;
  if (name == "kv_usage") return s.kv_usage;
  return std::nullopt;
}

}  // namespace

SignalSampler::SignalSampler(SamplerConfig config, Fetcher fetch, const NvmlGpuUtil* nvml)
    : config_(std::move(config)), fetch_(std::move(fetch)), nvml_(nvml) {}

void SignalSampler::update_missing(double now, const Findings& findings) {
  for (const auto& [name, why] : findings) {
    const auto it = missing_.find(name);
    if (!why) {
      if (it == missing_.end()) continue;
      log::info("scaler.signal_recovered",
                {{"model", config_.model}, {"signal", name}, {"missing_for_s", now - it->second.since}});
      missing_.erase(it);
      continue;
    }
    auto& r = missing_[name];
    if (r.samples == 0) {
      r.since = now;
      const auto needed = config_.needed_by.find(name);
      if (needed != config_.needed_by.end()) r.needed_by = needed->second;
    }
    r.detail = *why;
    r.last = now;
    ++r.samples;
    // Logged when first seen; again every interval while a configured key depends on it, so
    // a target that does nothing never goes quiet.
    if (r.warnings > 0 && (r.needed_by.empty() || now - r.last_warned < config_.missing_warn_every_s)) continue;
    boost::json::array keys;
    for (const auto& k : r.needed_by) keys.push_back(boost::json::value(k));
    log::warn("scaler.signal_missing", {{"model", config_.model}, {"signal", name}, {"detail", r.detail},
                                        {"needed_by", std::move(keys)}, {"missing_for_s", now - r.since},
                                        {"samples", r.samples}});
    ++r.warnings;
    r.last_warned = now;
  }
}

void SignalSampler::engine_signals(const std::vector<Endpoint>& active, SampleDetail& d, Findings& f) {
  double waiting = 0, running = 0, kv = 0, queries = 0, hits = 0, rate = 0, resolution = 0;
  int n_waiting = 0, n_running = 0, n_kv = 0, n_counters = 0, n_rate = 0;
  std::set<std::string> engines;
  std::string counted;  // the replicas whose prefix counters are in the sums
  std::map<std::string, std::pair<double, double>> replica_prefix;
  for (const auto& e : active) {
    const auto body = fetch_("http://" + e.host + ":" + std::to_string(e.port) + config_.metrics_path);
    if (!body) {
      ++d.engines_failed;
      continue;
    }
    ++d.engines_scraped;
    const auto m = extract_engine_metrics(parse_prometheus_text(*body));
    if (!m.engine.empty()) engines.insert(m.engine);
    if (m.waiting) waiting += *m.waiting, ++n_waiting;
    if (m.running) running += *m.running, ++n_running;
    if (m.kv_usage) kv += *m.kv_usage, ++n_kv;
    if (m.prefix_queries_total && m.prefix_hits_total) {
      const auto key = e.host + ":" + std::to_string(e.port);
      queries += *m.prefix_queries_total, hits += *m.prefix_hits_total, resolution += m.prefix_resolution,
          ++n_counters, counted += key + " ";
      // Per replica, for routing's dashboards: its own difference since the last sample with
      // enough tokens (a restart, counters going down, starts afresh).
      const auto last = replica_prefix_.find(key);
      const double min_tokens = 50 * std::max(1.0, m.prefix_resolution);
      if (last == replica_prefix_.end() || *m.prefix_queries_total < last->second.first ||
          *m.prefix_hits_total < last->second.second) {
        replica_prefix[key] = {*m.prefix_queries_total, *m.prefix_hits_total};
        replica_prefix_ratio_.erase(key);
      } else if (const double dq = *m.prefix_queries_total - last->second.first; dq >= min_tokens) {
        replica_prefix[key] = {*m.prefix_queries_total, *m.prefix_hits_total};
        replica_prefix_ratio_[key] = std::clamp((*m.prefix_hits_total - last->second.second) / dq, 0.0, 1.0);
      } else {
        replica_prefix[key] = last->second;
      }
    }
    else if (m.prefix_hit_rate)
      rate += *m.prefix_hit_rate, ++n_rate;
  }
  // Replicas gone from the routed set are forgotten (their series go with them).
  replica_prefix_ = std::move(replica_prefix);
  std::erase_if(replica_prefix_ratio_, [&](const auto& kv) { return !replica_prefix_.count(kv.first); });
  d.prefix_hit_ratio_by_replica = replica_prefix_ratio_;
  if (d.engines_scraped == 0) {
    if (d.engines_failed > 0) f["engine.scrape"] = "no replica answered " + config_.metrics_path;
    return;
  }
  f["engine.scrape"] = std::nullopt;
  // Prefix caching: counters differenced between samples (a replica joining or leaving, or an
  // engine restart, makes the sums jump: the difference starts afresh), else the engines' own
  // hit-rate gauges. Too few tokens to tell (fewer than 50, or than 50 steps of what the engine
  // prints) wait for more.
  bool prefix = true;
  if (n_counters > 0 && n_counters == d.engines_scraped) {
    const double min_tokens = 50 * std::max(1.0, resolution);
    const bool same = counted == prefix_replicas_;
    prefix_replicas_ = counted;
    if (same && last_prefix_ && queries >= last_prefix_->first && hits >= last_prefix_->second) {
      const double dq = queries - last_prefix_->first, dh = hits - last_prefix_->second;
      if (dq >= min_tokens) {
        d.prefix_hit_ratio = std::clamp(dh / dq, 0.0, 1.0);
        last_prefix_ = std::pair{queries, hits};
      }
    } else {
      last_prefix_ = std::pair{queries, hits};
    }
  } else if (n_rate > 0) {
    d.prefix_hit_ratio = std::clamp(rate / n_rate, 0.0, 1.0);
  } else {
    prefix = false;
  }
  f["engine.prefix_cache"] = prefix ? std::nullopt
                                    : std::optional<std::string>(
                                          "no prefix-cache metric (vllm:prefix_cache_queries_total/hits_total, "
                                          "sglang:cached_tokens_total, llamacpp:prompt_tokens_cached_total, "
                                          "sglang:cache_hit_rate): no prompt is taken as cached");
  const std::string in = " in " + config_.metrics_path + " (looked for ";
  if (n_waiting) d.engine_waiting = waiting;
  f["engine.waiting"] = n_waiting ? std::nullopt : std::optional<std::string>("no queue-length metric" + in + kWaitingNames + ")");
  if (n_running) d.engine_running = running;
  f["engine.running"] =
      n_running ? std::nullopt : std::optional<std::string>("no running-requests metric" + in + kRunningNames + ")");
  if (n_kv) d.engine_kv = kv / n_kv;
  f["engine.kv_usage"] = n_kv ? std::nullopt
                              : std::optional<std::string>(kv_detail(engines, config_.metrics_path,
                                                                     config_.kv_tokens_per_replica.has_value()));
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

Signals SignalSampler::sample(double now, const SignalSource* gateway, const std::vector<Endpoint>& active,
                              SampleDetail* out) {
  SampleDetail d;
  Findings found;
  if (gateway) d.gateway = gateway->sample(config_.model);
  if (config_.engine_metrics && !active.empty()) engine_signals(active, d, found);

  // GPU utilisation: DCGM exporter when configured, NVML when the driver is here.
  if (!config_.dcgm_url.empty()) {
    const auto body = fetch_(config_.dcgm_url);
    if (body) d.gpu_util = dcgm_gpu_util(parse_prometheus_text(*body), config_.gpus);
    if (d.gpu_util) d.gpu_source = "dcgm";
    found["gpu_util.dcgm"] =
        d.gpu_util ? std::nullopt : std::optional<std::string>("no DCGM_FI_DEV_GPU_UTIL at " + config_.dcgm_url);
  } else if (config_.nvml && nvml_ && nvml_->available()) {
    d.gpu_util = nvml_->utilisation(config_.gpus);
    if (d.gpu_util) d.gpu_source = "nvml";
    found["gpu_util.nvml"] = std::nullopt;
  } else if (config_.nvml) {
    found["gpu_util.nvml"] = nvml_ ? nvml_->why_unavailable() : "NVML not loaded";
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

  // Signals that configured keys need, where their source was there to ask: KV usage needs an
  // engine that answered (with engine metrics off it never comes); queue and concurrency the
  // gateway or an engine; GPU utilisation is always asked for (DCGM or NVML).
  for (const auto& [name, keys] : config_.needed_by) {
    const bool asked = name == "gpu_util" ||
                       (name == "kv_usage" ? d.engines_scraped > 0 || !config_.engine_metrics
                                           : d.gateway || d.engines_scraped > 0);
    if (!asked) continue;
    if (policy_signal(s, name)) {
      found[name] = std::nullopt;
      continue;
    }
    auto cause = [&](std::initializer_list<const char*> sources) -> std::string {
      for (const char* src : sources)
        if (const auto it = found.find(src); it != found.end() && it->second) return *it->second;
      if (name == "gpu_util" && config_.dcgm_url.empty() && !config_.nvml) return "signals.dcgm_url is empty and nvml is off";
      if (name == "kv_usage" && !config_.engine_metrics) return "signals.engine_metrics is off";
      return "no " + name + " signal";
    };
    const std::string why = name == "kv_usage"   ? cause({"engine.kv_usage"})
                            : name == "gpu_util" ? cause({"gpu_util.dcgm", "gpu_util.nvml"})
                                                 : cause({"engine.waiting", "engine.running"});
    std::string joined;
    for (const auto& k : keys) joined += (joined.empty() ? "" : ", ") + k;
    found[name] = joined + " has no effect: " + why;
  }
  update_missing(now, found);
  if (out) *out = std::move(d);
  return s;
}

}  // namespace tidegate::scaler
