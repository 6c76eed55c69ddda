#include "tidegate/scaler/scaler.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <deque>
#include <map>

#include "decision_log.h"
#include "fenced_actuator.h"
#include "http_client.h"
#include "scaler_metrics.h"
#include "shared_observation.h"
#include "tidegate/common/log.h"
#include "tidegate/scaler/actuators.h"

namespace tidegate::scaler {
namespace json = boost::json;

struct Scaler::Pool {
  ModelPoolConfig config;  // policy limits may change at run time (guarded by state_mutex_)
  std::unique_ptr<Actuator> actuator;
  FencedActuator* fenced = nullptr;  // `actuator` itself, with leader election on
  std::unique_ptr<PoolController> controller;
  std::unique_ptr<SignalSampler> sampler;
  PolicyState policy_state;
  // Snapshots for the admin API (state_mutex_).
  DecisionLog decisions{200};
  std::vector<ReplicaInfo> replicas;
  std::deque<PoolEvent> events;
  std::map<std::string, MissingSignal> missing;
  PoolCounts counts;
  ActuatorStats stats;
  int warm_target = 0;
  std::map<std::string, double> prefix_hit_ratio;  // per routed replica, "host:port"
};

namespace {

std::unique_ptr<Actuator> default_actuator(const ModelPoolConfig& c) {
  switch (c.actuator) {
    case ActuatorKind::kProcess: return make_process_actuator(c.process);
    case ActuatorKind::kKubernetes: return make_kubernetes_actuator(c.kubernetes);
    case ActuatorKind::kStatic: return make_static_actuator(c.fixed);
  }
  return nullptr;
}

double system_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The policy signals each configured key uses, so that a target without its signal is loud.
std::map<std::string, std::vector<std::string>> needed_by(const PolicyConfig& p) {
  std::map<std::string, std::vector<std::string>> out;
  if (p.targets.concurrency_per_replica) out["concurrency"].push_back("policy.targets.concurrency_per_replica");
  if (p.targets.queue_per_replica) out["queue"].push_back("policy.targets.queue_per_replica");
  if (p.targets.gpu_util) out["gpu_util"].push_back("policy.targets.gpu_util");
  if (p.targets.kv_usage) out["kv_usage"].push_back("policy.targets.kv_usage");
  return out;
}

}  // namespace

Scaler::Scaler(std::shared_ptr<const ScalerConfig> config, RoutingTarget& routing, const SignalSource* signals,
               prometheus::Registry* registry, ScalerOptions options)
    : config_(std::move(config)), routing_(routing), signals_(signals), options_(std::move(options)) {
  if (!options_.make_actuator) options_.make_actuator = default_actuator;
  if (!options_.wall_clock) options_.wall_clock = system_now;
  if (!options_.fetch) {
    options_.fetch = [](const std::string& url) -> std::optional<std::string> {
      auto r = http::get(url, 0.5);
      if (!r.ok() || r.status != 200) return std::nullopt;
      return std::move(r.body);
    };
  }
  if (registry) metrics_ = std::make_unique<ScalerMetrics>(*registry);
  bool want_nvml = false;
  for (const auto& p : config_->pools) want_nvml = want_nvml || (p.signals.nvml && p.signals.dcgm_url.empty());
  if (want_nvml) {
    nvml_ = std::make_unique<NvmlGpuUtil>();
    if (!nvml_->available()) log::info("scaler.nvml_unavailable", {{"why", nvml_->why_unavailable()}});
  }
  if (const auto& le = config_->leader_election; le.kind != ElectionKind::kNone)
    elector_ = options_.make_elector ? options_.make_elector(le) : make_leader_elector(le);
  if (const auto& le = config_->leader_election; elector_ && le.kind == ElectionKind::kFile)
    shared_ = std::make_unique<SharedObservationFile>(le.lock_file + ".replicas.json",
                                                      std::max(3.0, 5 * config_->tick_s));
  for (const auto& pc : config_->pools) {
    auto pool = std::make_unique<Pool>();
    pool->config = pc;
    pool->decisions = DecisionLog(config_->decisions_kept);
    pool->actuator = options_.make_actuator(pc);
    if (elector_) {
      std::function<PoolObservation()> view;
      if (shared_) view = [this, model = pc.model] { return shared_->read(model, options_.wall_clock()); };
      // Both: the lease can be lost mid-tick (stop there), and won mid-tick, when the tick's
      // decision was a follower's (ask for every replica, to route them all) and must not act.
      auto fenced = std::make_unique<FencedActuator>(
          std::move(pool->actuator), [this, e = elector_.get()] { return tick_acts_ && e->may_actuate(); }, view);
      pool->fenced = fenced.get();
      pool->actuator = std::move(fenced);
    }
    pool->controller = std::make_unique<PoolController>(pc.model, pc.replica_class, pc.lifecycle, *pool->actuator,
                                                        routing_, options_.listener);
    auto sampler_cfg = pc.signals;
    sampler_cfg.ttft_slo_s = pc.policy.slo.ttft_s;
    sampler_cfg.kv_tokens_per_replica = pc.policy.capacity.kv_tokens;
    sampler_cfg.needed_by = needed_by(pc.policy);
    pool->sampler = std::make_unique<SignalSampler>(sampler_cfg, options_.fetch, nvml_.get());
    pools_.push_back(std::move(pool));
  }
}

Scaler::~Scaler() { stop(true); }

double Scaler::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Scaler::start() {
  if (thread_.joinable()) return;
  if (elector_) elector_->start();
  {
    std::lock_guard lock(wake_mutex_);
    stopping_ = false;
  }
  thread_ = std::thread([this] {
    const auto period = std::chrono::duration<double>(config_->tick_s);
    auto next = std::chrono::steady_clock::now();
    while (true) {
      tick();
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
      if (next < std::chrono::steady_clock::now()) next = std::chrono::steady_clock::now();  // overran: no catch-up burst
      std::unique_lock lock(wake_mutex_);
      if (wake_.wait_until(lock, next, [this] { return stopping_; })) return;
    }
  });
}

void Scaler::stop(bool stop_replicas) {
  {
    std::lock_guard lock(wake_mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Kubernetes replicas belong to the fleet: hand the lease over before the shutdown below, so
  // its stops are fenced and the successor keeps the replicas. A process actuator's replicas
  // are this process's children and die with it: those are stopped first, then the lock goes.
  if (elector_ && config_->leader_election.kind == ElectionKind::kKubernetes) elector_->stop();
  if (!stop_replicas) {
    if (elector_) elector_->stop();
    return;
  }
  std::lock_guard lock(tick_mutex_);
  tick_acts_ = acting();
  for (auto& p : pools_) {
    p->controller->shutdown(now());
    std::lock_guard state_lock(state_mutex_);
    p->counts = p->controller->counts();
    p->replicas = p->controller->replicas();
  }
  if (elector_) elector_->stop();
}

bool Scaler::acting() const { return !elector_ || elector_->may_actuate(); }

void Scaler::tick() {
  std::lock_guard lock(tick_mutex_);
  const double t = now();
  tick_acts_ = acting();  // one role per tick, whatever the elector's thread does meanwhile
  const bool shares = shared_ && tick_acts_;
  // What the followers still send to: the leader's drains wait for it.
  auto held_elsewhere = shares ? shared_->held_elsewhere(elector_->identity(), options_.wall_clock())
                               : std::map<std::string, std::set<std::string>>{};
  for (auto& p : pools_) {
    if (shared_) p->controller->set_held_elsewhere(std::move(held_elsewhere[p->config.model]));
    try {
      tick_pool(*p, t);
    } catch (const std::exception& e) {
      // A bad tick (an actuator's surprise) must not stop scaling of the other pools.
      log::error("scaler.tick_failed", {{"model", p->config.model}, {"error", e.what()}});
    }
  }
  if (!shared_) return;
  std::string error;
  if (shares) {
    // What the actuators see, with the replicas being drained marked so that followers drain
    // them too.
    std::map<std::string, PoolObservation> by_model;
    for (const auto& p : pools_) {
      auto& obs = by_model[p->config.model] = p->fenced->last();
      std::set<std::string> draining;
      for (const auto& r : p->controller->replicas())
        if (r.state == ReplicaState::kDraining) draining.insert(r.id);
      for (auto& r : obs.replicas) r.draining = draining.count(r.id) > 0;
    }
    if (!shared_->write(elector_->identity(), options_.wall_clock(), by_model, &error))
      log::error("scaler.share_failed", {{"path", shared_->path()}, {"error", error}});
  } else {
    // A follower: the leader's replicas it routes or still drains, which the leader must not stop.
    std::map<std::string, std::vector<std::string>> held;
    for (const auto& p : pools_) {
      auto& ids = held[p->config.model];
      for (const auto& r : p->controller->replicas())
        if (r.state == ReplicaState::kActive || r.state == ReplicaState::kDraining) ids.push_back(r.id);
    }
    if (!shared_->write_held(elector_->identity(), options_.wall_clock(), held, &error))
      log::error("scaler.share_failed", {{"path", shared_->path()}, {"error", error}});
  }
}

void Scaler::tick_pool(Pool& p, double t) {
  PolicyConfig policy;
  {
    std::lock_guard lock(state_mutex_);
    policy = p.config.policy;
  }
  const auto before = p.controller->counts();
  std::vector<Endpoint> active;
  for (const auto& r : p.controller->replicas())
    if (r.state == ReplicaState::kActive) active.push_back(r.endpoint);

  SampleDetail detail;
  PolicyInput in;
  in.t = t;
  in.signals = p.sampler->sample(t, signals_, active, &detail);
  const std::time_t wall = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&wall, &utc);
  in.time_of_day_s = utc.tm_hour * 3600.0 + utc.tm_min * 60.0 + utc.tm_sec;
  in.weekday = utc.tm_wday;
  in.active = before.active;
  in.starting = capacity_on_the_way(before, p.controller->warm_target());
  in.warm = before.warm;
  in.cold_start_s = p.controller->measured_startup_s();
  const bool acts = tick_acts_;
  in.decided_elsewhere = !acts;
  Decision d = decide(policy, p.policy_state, in);
  if (d.direction != Direction::kHold)
    log::info("scaler.decision", {{"model", p.config.model}, {"desired", d.desired}, {"active", d.active},
                                  {"starting", d.starting}, {"direction", std::string(to_string(d.direction))},
                                  {"reason", d.reason}, {"actuated", acts}});

  p.controller->set_max_replicas(policy.max_replicas);  // warm replicas count within it
  // A follower routes every replica the leader runs (it cannot know which the leader keeps
  // warm), so it asks for more than it sees: then it promotes all, never drains or stops one,
  // and its starts are withheld by the fence. The decision above is kept, not acted on.
  const int desired = acts ? d.desired : p.fenced->live() + policy.max_replicas;
  p.controller->step(t, desired, detail.gateway ? &*detail.gateway : nullptr,
                     !acts || d.desired_tiers.empty() ? 0 : d.desired_tiers.front());

  const auto counts = p.controller->counts();
  const auto stats = p.actuator->stats();
  if (metrics_) {
    metrics_->record(p.config.model, d, counts, stats, p.controller->replaced_total());
    metrics_->record_missing(p.config.model, p.sampler->missing());
    metrics_->record_prefix(p.config.model, detail.prefix_hit_ratio_by_replica);
    if (elector_) metrics_->record_leader(p.config.model, acts, elector_->status().transitions);
  }
  std::lock_guard lock(state_mutex_);
  p.decisions.push(std::move(d), options_.wall_clock(), acts);
  p.replicas = p.controller->replicas();
  p.events = p.controller->events();
  p.missing = p.sampler->missing();
  p.warm_target = p.controller->warm_target();
  p.counts = counts;
  p.stats = stats;
  p.prefix_hit_ratio = detail.prefix_hit_ratio_by_replica;
}

std::map<std::string, double> Scaler::prefix_hit_ratios(const std::string& model) const {
  std::lock_guard lock(state_mutex_);
  for (const auto& p : pools_)
    if (p->config.model == model) return p->prefix_hit_ratio;
  return {};
}

json::object Scaler::admin_state() const {
  constexpr std::size_t kDecisionsShown = 50, kChangesShown = 20;
  std::lock_guard lock(state_mutex_);
  // Replica and fault times are on the monotonic clock (they order transitions); each also gets
  // its wall-clock time, through the clocks' offset now.
  const double mono = now(), wall = options_.wall_clock();
  auto wall_of = [&](double t) { return iso8601_utc(t - mono + wall); };
  json::array pools;
  for (const auto& p : pools_) {
    json::array replicas, events, decisions, changes, missing;
    for (const auto& r : p->replicas)
      replicas.push_back(json::object{{"id", r.id},
                                      {"endpoint", r.endpoint.host + ":" + std::to_string(r.endpoint.port)},
                                      {"state", std::string(to_string(r.state))},
                                      {"since", r.since},
                                      {"since_time", wall_of(r.since)},
                                      {"pending", r.placeholder}});
    for (const auto& e : p->events)
      events.push_back(json::object{
          {"t", e.t}, {"time", wall_of(e.t)}, {"replica", e.replica_id}, {"kind", e.kind}, {"detail", e.detail}});
    // Newest first. `changes` are the ups and downs alone, however many holds came between.
    const auto& records = p->decisions.records();
    for (auto it = records.rbegin(); it != records.rend(); ++it) {
      if (decisions.size() < kDecisionsShown) decisions.push_back(decision_record_json(*it));
      if (it->decision.direction != Direction::kHold && changes.size() < kChangesShown)
        changes.push_back(decision_record_json(*it));
    }
    for (const auto& [name, m] : p->missing) {
      json::array keys;
      for (const auto& k : m.needed_by) keys.push_back(json::value(k));
      missing.push_back(json::object{{"signal", name},
                                     {"detail", m.detail},
                                     {"needed_by", std::move(keys)},
                                     {"since", m.since - mono + wall},
                                     {"since_time", wall_of(m.since)},
                                     {"missing_for_s", m.last - m.since},
                                     {"samples", m.samples},
                                     {"warnings", m.warnings}});
    }
    json::object prefix;
    for (const auto& [replica, ratio] : p->prefix_hit_ratio) prefix[replica] = ratio;
    const auto& pol = p->config.policy;
    pools.push_back(json::object{
        {"prefix_cache_hit_ratio", std::move(prefix)},
        {"model", p->config.model},
        {"replica_class", p->config.replica_class},
        {"actuator", std::string(p->actuator->kind())},
        {"role", !elector_ ? "alone" : elector_->may_actuate() ? "leader" : "follower"},
        {"limits", json::object{{"min_replicas", pol.min_replicas}, {"max_replicas", pol.max_replicas},
                                {"scale_to_zero", pol.scale_to_zero}}},
        {"warm_pool_size", p->config.lifecycle.warm_pool_size},
        {"warm_pool_effective", p->warm_target},
        {"counts", json::object{{"starting", p->counts.starting}, {"warm", p->counts.warm},
                                {"active", p->counts.active}, {"draining", p->counts.draining},
                                {"standby", p->counts.standby}}},
        {"replicas", std::move(replicas)},
        {"faults", std::move(events)},
        {"missing_signals", std::move(missing)},
        {"actuator_errors", p->stats.errors},
        {"actuator_retries", p->stats.retries},
        {"actuator_last_error", p->stats.last_error},
        {"decisions", std::move(decisions)},
        {"changes", std::move(changes)}});
  }
  json::value election = nullptr;
  if (elector_) {
    const auto s = elector_->status();
    const auto& le = config_->leader_election;
    election = json::object{
        {"kind", le.kind == ElectionKind::kKubernetes ? "kubernetes" : "file"},
        {"lease", le.kind == ElectionKind::kKubernetes ? le.lease_name : le.lock_file},
        {"identity", elector_->identity()},
        {"role", s.may_actuate ? "leader" : "follower"},
        {"holder", s.holder},
        // Leader in name whose renewals fail: fenced (not acting) until one succeeds or it steps down.
        {"fenced", s.leader && !s.may_actuate},
        {"transitions", s.transitions},
        {"last_error", s.last_error}};
  }
  return json::object{{"tick_s", config_->tick_s},
                      {"leader_election", std::move(election)},
                      {"now", json::object{{"t", wall}, {"time", iso8601_utc(wall)}, {"t_monotonic", mono}}},
                      {"pools", std::move(pools)}};
}

bool Scaler::set_limits(const std::string& model, int min_replicas, int max_replicas, std::string* error) {
  std::lock_guard lock(state_mutex_);
  for (auto& p : pools_) {
    if (p->config.model != model) continue;
    PolicyConfig next = p->config.policy;
    next.min_replicas = min_replicas;
    next.max_replicas = max_replicas;
    try {
      validate(next);
    } catch (const std::invalid_argument& e) {
      if (error) *error = e.what();
      return false;
    }
    p->config.policy = next;
    log::info("scaler.limits_changed", {{"model", model}, {"min_replicas", min_replicas}, {"max_replicas", max_replicas}});
    // The config check would have refused this; at run time the operator's limits win and the
    // warm pool shrinks to what they leave (warm replicas count within max_replicas).
    if (const int warm = p->config.lifecycle.warm_pool_size; warm > max_replicas - min_replicas)
      log::warn("scaler.warm_pool_clipped", {{"model", model}, {"warm_pool_size", warm},
                                             {"fits_at_min_replicas", max_replicas - min_replicas}});
    return true;
  }
  if (error) *error = "unknown model '" + model + "'";
  return false;
}

std::vector<Decision> Scaler::recent_decisions(const std::string& model) const {
  std::lock_guard lock(state_mutex_);
  for (const auto& p : pools_) {
    if (p->config.model != model) continue;
    std::vector<Decision> out;
    for (const auto& r : p->decisions.records()) out.push_back(r.decision);
    return out;
  }
  return {};
}

PoolCounts Scaler::counts(const std::string& model) const {
  std::lock_guard lock(state_mutex_);
  for (const auto& p : pools_)
    if (p->config.model == model) return p->counts;
  return {};
}

}  // namespace tidegate::scaler
