#include "scaler_metrics.h"

namespace tidegate::scaler {

ScalerMetrics::ScalerMetrics(prometheus::Registry& r)
    : replicas_(prometheus::BuildGauge().Name("tidegate_replicas").Help("Replicas by lifecycle state").Register(r)),
      desired_(prometheus::BuildGauge()
                   .Name("tidegate_scaler_desired_replicas")
                   .Help("Active replicas the policy wants")
                   .Register(r)),
      decisions_(prometheus::BuildCounter()
                     .Name("tidegate_scaler_decisions_total")
                     .Help("Scaling decisions by direction and reason code")
                     .Register(r)),
      actuator_errors_(prometheus::BuildCounter()
                           .Name("tidegate_scaler_actuator_errors_total")
                           .Help("Actuator failures after retries (API errors, failed spawns)")
                           .Register(r)),
      actuator_retries_(prometheus::BuildCounter()
                            .Name("tidegate_scaler_actuator_retries_total")
                            .Help("Retried actuator API calls")
                            .Register(r)),
      faults_(prometheus::BuildCounter()
                  .Name("tidegate_scaler_replicas_replaced_total")
                  .Help("Replicas replaced after a startup timeout or a death")
                  .Register(r)),
      signal_(prometheus::BuildGauge()
                  .Name("tidegate_scaler_signal")
                  .Help("Signal values the policy saw on its last tick")
                  .Register(r)),
      missing_(prometheus::BuildGauge()
                   .Name("tidegate_scaler_signal_missing")
                   .Help("1 while a signal is missing from what the scaler samples (engine metric, GPU utilisation, "
                         "or a signal a configured target needs); 0 once it is back")
                   .Register(r)),
      prefix_(prometheus::BuildGauge()
                  .Name("tidegate_replica_prefix_cache_hit_ratio")
                  .Help("Prompt tokens a routed replica's engine found in its prefix cache over those it looked up, "
                        "between the scaler's last two samples with enough tokens (vllm:prefix_cache_hits_total / "
                        "queries_total, sglang:cached_tokens_total / prompt_tokens_total, llama.cpp's cached prompt "
                        "tokens)")
                  .Register(r)),
      leader_(prometheus::BuildGauge()
                  .Name("tidegate_scaler_leader")
                  .Help("1 while this gateway's scaler holds the leader election and acts for the pool; 0 while it "
                        "follows (computes decisions, does not start or stop replicas)")
                  .Register(r)),
      leader_transitions_(prometheus::BuildCounter()
                              .Name("tidegate_scaler_leader_transitions_total")
                              .Help("Changes of this scaler's role (follower to leader and back)")
                              .Register(r)) {}

void ScalerMetrics::record_leader(const std::string& model, bool leader, std::uint64_t transitions) {
  leader_.Add({{"model", model}}).Set(leader ? 1 : 0);
  auto& c = leader_transitions_.Add({{"model", model}});
  if (static_cast<double>(transitions) > c.Value()) c.Increment(static_cast<double>(transitions) - c.Value());
}

void ScalerMetrics::record_prefix(const std::string& model, const std::map<std::string, double>& by_replica) {
  auto& series = prefix_series_[model];
  for (auto it = series.begin(); it != series.end();) {
    if (by_replica.count(it->first)) {
      ++it;
      continue;
    }
    prefix_.Remove(it->second);
    it = series.erase(it);
  }
  for (const auto& [replica, ratio] : by_replica) {
    auto& g = series[replica];
    if (!g) g = &prefix_.Add({{"model", model}, {"replica", replica}});
    g->Set(ratio);
  }
}

void ScalerMetrics::record_missing(const std::string& model, const std::map<std::string, MissingSignal>& missing) {
  auto& seen = missing_seen_[model];
  for (const auto& [name, m] : missing) seen.insert(name);
  for (const auto& name : seen) missing_.Add({{"model", model}, {"signal", name}}).Set(missing.count(name) ? 1 : 0);
}

void ScalerMetrics::record(const std::string& model, const Decision& d, const PoolCounts& c, const ActuatorStats& stats,
                           std::uint64_t faults) {
  replicas_.Add({{"model", model}, {"state", "starting"}}).Set(c.starting);
  replicas_.Add({{"model", model}, {"state", "warm"}}).Set(c.warm);
  replicas_.Add({{"model", model}, {"state", "active"}}).Set(c.active);
  replicas_.Add({{"model", model}, {"state", "draining"}}).Set(c.draining);
  replicas_.Add({{"model", model}, {"state", "standby"}}).Set(c.standby);
  desired_.Add({{"model", model}}).Set(d.desired);
  decisions_.Add({{"model", model}, {"direction", std::string(to_string(d.direction))}, {"reason", d.reason_code}})
      .Increment();
  // The actuator and controller own the counting; these counters catch up to them.
  auto catch_up = [&](prometheus::Family<prometheus::Counter>& f, std::uint64_t total) {
    auto& c = f.Add({{"model", model}});
    if (static_cast<double>(total) > c.Value()) c.Increment(static_cast<double>(total) - c.Value());
  };
  catch_up(actuator_errors_, stats.errors);
  catch_up(actuator_retries_, stats.retries);
  catch_up(faults_, faults);
  const std::pair<const char*, const std::optional<double>*> sigs[] = {{"concurrency", &d.inputs.concurrency},
                                                                        {"queue", &d.inputs.queue},
                                                                        {"gpu_util", &d.inputs.gpu_util},
                                                                        {"kv_usage", &d.inputs.kv_usage}};
  for (const auto& [name, v] : sigs)
    if (*v) signal_.Add({{"model", model}, {"signal", name}}).Set(**v);
  if (d.work) {
    // The work model's view, in replicas of load (and the measured attainment).
    signal_.Add({{"model", model}, {"signal", "work_demand"}}).Set(d.work->demand);
    signal_.Add({{"model", model}, {"signal", "burst_margin"}}).Set(d.work->burst_margin);
    signal_.Add({{"model", model}, {"signal", "slo_headroom"}}).Set(d.work->headroom);
    if (d.work->attainment) signal_.Add({{"model", model}, {"signal", "ttft_attainment"}}).Set(*d.work->attainment);
  }
}

}  // namespace tidegate::scaler
