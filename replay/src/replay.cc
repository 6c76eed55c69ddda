#include "tidegate/replay/replay.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <stdexcept>

#include "fleet.h"
#include "router.h"
#include "tidegate/scaler/policy.h"
#include "virtual_pool.h"

namespace tidegate::replay {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kStallLimitS = 86400;

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  const auto idx = std::min(k, v.size() - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(idx), v.end());
  return v[idx];
}

struct RequestRecord {
  double dispatched = -1;
  double first_token = -1;
  double finished = -1;
  bool rejected = false;
};

class Run {
 public:
  Run(const Trace& trace, ScalingPolicy& policy, const ReplayOptions& opt)
      : trace_(trace), policy_(policy), opt_(opt), fleet_(opt, trace.block_tokens), pool_(fleet_), records_(trace.requests.size()) {}

  ReplayResult execute() {
    const int initial = opt_.initial_active > 0 ? opt_.initial_active : opt_.replicas_min;
    fleet_.add_ready(std::clamp(initial, opt_.replicas_min, opt_.replicas_max), 0);
    const double decide_period = policy_.decide_period_s();
    double next_sample = opt_.sample_period_s, next_decide = decide_period;
    double next_progress = 0;
    const double progress_step = std::max(1.0, trace_.duration_s() / 200);
    double t = 0;
    while (true) {
      const bool arrivals_left = next_arrival_ < trace_.requests.size();
      if (!arrivals_left && queue_.empty() && in_flight_ == 0) break;
      double next = std::min(next_sample, fleet_.next_transition());
      if (arrivals_left) next = std::min(next, trace_.requests[next_arrival_].arrival_s);
      for (const auto& r : fleet_.replicas())
        if (r->in_flight > 0) next = std::min(next, r->engine->next_event_time());
      t = std::max(t, next);
      if (!arrivals_left && t > trace_.duration_s() + kStallLimitS) {
        std::string fleet;
        for (const auto& r : fleet_.replicas())
          fleet += " r" + std::to_string(r->id) + ":" + state_name(r->state) + "/" + std::to_string(r->in_flight);
        throw std::runtime_error("replay stalled: " + std::to_string(in_flight_) + " in flight, " +
                                 std::to_string(queue_.size()) + " queued a day after the last arrival (policy " +
                                 policy_.name() + "; replicas/in-flight:" + fleet + ")");
      }

      advance_engines(t);
      fleet_.complete_transitions(t);
      while (next_arrival_ < trace_.requests.size() && trace_.requests[next_arrival_].arrival_s <= t) {
        period_prompt_tokens_ += trace_.requests[next_arrival_].prompt_tokens;
        period_sizes_[scaler::PromptSizes::bucket_of(static_cast<double>(trace_.requests[next_arrival_].prompt_tokens))] += 1;
        queued_tokens_ += trace_.requests[next_arrival_].prompt_tokens;
        queue_.push_back(next_arrival_++);
        ++period_arrivals_;
      }
      dispatch(t);
      if (t >= next_sample) {
        const auto obs = observe(t);
        policy_.observe(obs);
        if (t >= next_decide - 1e-9) {
          if (policy_.drives_lifecycle()) {
            pool_.set_now(t);
            policy_.control(obs, t >= opt_.warmup_s, pool_, pool_);
            if (t >= opt_.warmup_s) pool_.after_step();
          } else {
            const auto target = policy_.decide(obs);
            if (t >= opt_.warmup_s) fleet_.apply(target, t);
          }
          next_decide += decide_period;
          dispatch(t);
        }
        timeline_tick(t, obs);
        next_sample += opt_.sample_period_s;
      }
      if (opt_.progress && t >= next_progress) {
        opt_.progress(t, trace_.duration_s());
        next_progress = t + progress_step;
      }
    }
    if (bucket_arrivals_ > 0 || period_arrivals_ > 0 || !bucket_ttfts_.empty()) {
      const auto o = observe(t);  // the last, partial bucket
      bucket_arrivals_ += o.arrivals;
      push_row(o);
    }
    const auto prefix = fleet_.prefix_cache_totals();
    fleet_.close(t);
    prefix_queries_ = prefix.queries_tokens;
    prefix_hits_ = prefix.hits_tokens;
    if (opt_.progress) opt_.progress(trace_.duration_s(), trace_.duration_s());
    return summarize(t);
  }

 private:
  void advance_engines(double t) {
    for (auto& r : fleet_.replicas()) {
      if (r->in_flight == 0 || r->engine->next_event_time() > t) continue;
      events_.clear();
      r->engine->advance(t, events_);
      handle_events(*r);
    }
    fleet_.retire_idle_draining(t);
  }

  void handle_events(detail::Replica& r) {
    for (const auto& ev : events_) {
      auto& rec = records_[ev.id];
      switch (ev.kind) {
        case sim::EventKind::kFirstToken:
          rec.first_token = ev.t;
          period_ttfts_.push_back(ev.t - trace_.requests[ev.id].arrival_s);
          bucket_ttfts_.push_back(period_ttfts_.back());
          period_in_slo_ += period_ttfts_.back() <= opt_.slo.ttft_s;
          break;
        case sim::EventKind::kRejected:
          rec.rejected = true;
          [[fallthrough]];
        case sim::EventKind::kFinished:
          rec.finished = ev.t;
          --r.in_flight;
          --in_flight_;
          break;
        case sim::EventKind::kToken: break;
      }
    }
  }

  // The replica the balancer sends `req` to, among the active ones with a free slot.
  detail::Replica* pick(const TraceRequest& req) {
    eligible_.clear();
    views_.clear();
    for (auto& r : fleet_.replicas())
      if (r->state == kActive && r->in_flight < opt_.profile.slots_per_replica) {
        eligible_.push_back(r.get());
        views_.push_back({r->in_flight, &r->routed_prefixes});
      }
    if (eligible_.empty()) return nullptr;
    return eligible_[router_.pick(views_, req)];
  }

  void dispatch(double t) {
    while (!queue_.empty()) {
      const auto& req = trace_.requests[queue_.front()];
      detail::Replica* best = pick(req);
      if (!best) return;
      const auto id = queue_.front();
      queue_.pop_front();
      queued_tokens_ -= req.prompt_tokens;
      events_.clear();
      best->engine->advance(t, events_);  // the model wants time to move forward before a submit
      handle_events(*best);
      router_.submit(*best->engine, best->routed_prefixes, id, req, t);
      ++best->in_flight;
      ++in_flight_;
      records_[id].dispatched = t;
      period_waits_.push_back(t - req.arrival_s);
    }
  }

  ClusterObservation observe(double t) {
    ClusterObservation o;
    o.t = t;
    o.period_s = opt_.sample_period_s;
    o.active = fleet_.count(kActive);
    o.starting = fleet_.count(kStarting);
    o.starting_for_active = fleet_.starting_for_active();
    o.promoting = fleet_.promoting();
    o.warm = fleet_.count(kWarm);
    o.draining = fleet_.count(kDraining);
    o.standby = fleet_.count(kStandby);
    o.queue_depth = queue_.size();
    o.oldest_wait_s = queue_.empty() ? 0 : t - trace_.requests[queue_.front()].arrival_s;
    o.queue_wait_p90_s = percentile(period_waits_, 0.9);
    o.in_flight = in_flight_;
    double kv = 0;
    int busy = 0;
    for (const auto& r : fleet_.replicas()) {
      if (r->state != kActive && r->state != kDraining) continue;
      const auto g = r->engine->gauges();
      o.running += g.running;
      o.engine_backlog_tokens += g.prefill_backlog_tokens;
      if (r->state == kActive) {
        kv += g.kv_usage;
        o.kv_used_tokens += g.kv_used_tokens;
        busy += g.running > 0;
      }
    }
    // Prefix-cache counters, as a scrape of the engines' totals gives them: the period's delta.
    const auto prefix = fleet_.prefix_cache_totals();
    const auto queried = prefix.queries_tokens - last_prefix_.queries_tokens;
    o.prefix_queried = queried > 0;
    o.prefix_hit_ratio = queried > 0 ? static_cast<double>(prefix.hits_tokens - last_prefix_.hits_tokens) / queried : 0;
    last_prefix_ = prefix;
    o.queued_prompt_tokens = queued_tokens_;
    o.arrival_prompt_tokens = period_prompt_tokens_;
    o.arrival_prompt_sizes = period_sizes_;
    o.first_tokens = period_ttfts_.size();
    o.first_tokens_in_slo = period_in_slo_;
    o.cold_start_s = opt_.profile.cold_start_s;
    o.kv_usage = o.active ? kv / o.active : 0;
    o.busy_fraction = o.active ? static_cast<double>(busy) / o.active : 0;
    o.arrivals = period_arrivals_;
    o.ttft_p90_s = percentile(period_ttfts_, 0.9);
    o.slots_per_replica = opt_.profile.slots_per_replica;
    o.capacity_per_replica = opt_.profile.capacity_per_replica;
    period_waits_.clear();
    period_ttfts_.clear();
    period_arrivals_ = 0;
    period_prompt_tokens_ = 0;
    period_sizes_.fill(0);
    period_in_slo_ = 0;
    return o;
  }

  void timeline_tick(double t, const ClusterObservation& o) {
    bucket_arrivals_ += o.arrivals;
    if (t + 1e-9 < bucket_start_ + opt_.timeline_period_s) return;
    push_row(o);
  }

  void push_row(const ClusterObservation& o) {
    TimelineRow row;
    row.t = bucket_start_;
    row.arrivals = bucket_arrivals_;
    row.active = o.active;
    row.starting = o.starting;
    row.warm = o.warm;
    row.draining = o.draining;
    row.queue_depth = o.queue_depth;
    row.in_flight = o.in_flight;
    row.ttft_p99_s = percentile(bucket_ttfts_, 0.99);
    timeline_.push_back(row);
    bucket_start_ += opt_.timeline_period_s;
    bucket_arrivals_ = 0;
    bucket_ttfts_.clear();
  }

  ReplayResult summarize(double t_end) {
    ReplayResult out;
    auto& s = out.summary;
    s.policy = policy_.name();
    s.requests = trace_.requests.size();
    s.duration_s = t_end;
    std::vector<double> ttft, e2e, wait;
    ttft.reserve(s.requests);
    e2e.reserve(s.requests);
    wait.reserve(s.requests);
    std::size_t ttft_ok = 0, e2e_ok = 0;
    for (std::size_t i = 0; i < s.requests; ++i) {
      const auto& rec = records_[i];
      const double arrival = trace_.requests[i].arrival_s;
      if (rec.finished >= 0) ++s.completed;
      if (opt_.keep_requests)
        out.requests.push_back(
            {rec.dispatched - arrival, rec.first_token - arrival, rec.finished - arrival, rec.rejected});
      if (rec.rejected) {
        ++s.rejected;  // counts against attainment: the user got an error
        continue;
      }
      ttft.push_back(rec.first_token - arrival);
      e2e.push_back(rec.finished - arrival);
      wait.push_back(rec.dispatched - arrival);
      if (ttft.back() <= opt_.slo.ttft_s) ++ttft_ok;
      if (e2e.back() <= opt_.slo.e2e_s) ++e2e_ok;
    }
    const double n = static_cast<double>(std::max<std::size_t>(s.requests, 1));
    s.ttft_slo_attainment = static_cast<double>(ttft_ok) / n;
    s.e2e_slo_attainment = static_cast<double>(e2e_ok) / n;
    s.ttft_p50_s = percentile(ttft, 0.5);
    s.ttft_p99_s = percentile(ttft, 0.99);
    s.e2e_p50_s = percentile(e2e, 0.5);
    s.e2e_p99_s = percentile(e2e, 0.99);
    s.queue_wait_p99_s = percentile(wait, 0.99);
    double gpu_seconds = 0;
    for (int i = 0; i < kStateCount; ++i) {
      s.gpu_hours_by_state[i] = fleet_.gpu_seconds()[i] / 3600;
      gpu_seconds += fleet_.gpu_seconds()[i];
    }
    s.gpu_hours = gpu_seconds / 3600;
    s.gpu_hours_unready_at_end = fleet_.unready_at_close_s() / 3600;
    s.cost_usd = s.gpu_hours * opt_.profile.usd_per_gpu_hour;
    s.mean_replicas = t_end > 0 ? gpu_seconds / opt_.profile.gpus_per_replica / t_end : 0;
    s.max_replicas = fleet_.max_replicas();
    s.scale_events = fleet_.scale_events();
    s.prefix_query_tokens = prefix_queries_;
    s.prefix_hit_tokens = prefix_hits_;
    s.prefix_routed = router_.prefix_routed();
    s.prefix_expected_blocks = router_.prefix_expected_blocks();
    out.timeline = std::move(timeline_);
    return out;
  }

  const Trace& trace_;
  ScalingPolicy& policy_;
  const ReplayOptions& opt_;
  detail::Fleet fleet_;
  detail::VirtualPool pool_;
  std::vector<RequestRecord> records_;
  std::deque<std::size_t> queue_;
  std::size_t next_arrival_ = 0;
  std::size_t in_flight_ = 0;
  std::vector<sim::Event> events_;
  std::vector<double> period_waits_, period_ttfts_, bucket_ttfts_;
  std::size_t period_arrivals_ = 0, bucket_arrivals_ = 0;
  std::int64_t period_prompt_tokens_ = 0, queued_tokens_ = 0;
  std::array<double, 24> period_sizes_{};
  std::size_t period_in_slo_ = 0;
  sim::PrefixCacheStats last_prefix_{};
  double bucket_start_ = 0;
  std::vector<TimelineRow> timeline_;
  std::int64_t prefix_queries_ = 0, prefix_hits_ = 0;
  // Dispatch: scratch vectors (no allocation per dispatch) and the balancer (router.h).
  std::vector<detail::Replica*> eligible_;
  std::vector<detail::Eligible> views_;
  detail::Router router_{opt_, trace_.block_tokens};
};

}  // namespace

const char* balancer_name(Balancer b) {
  switch (b) {
    case Balancer::kLeastOutstanding: return "least_outstanding";
    case Balancer::kRoundRobin: return "round_robin";
    case Balancer::kPrefixAware: return "prefix_aware";
    case Balancer::kIdeal: return "ideal";
  }
  return "unknown";
}

bool parse_balancer(std::string_view text, Balancer* out) {
  for (const auto b : {Balancer::kLeastOutstanding, Balancer::kRoundRobin, Balancer::kPrefixAware, Balancer::kIdeal})
    if (text == balancer_name(b)) return *out = b, true;
  return false;
}

const char* state_name(StateIndex s) {
  switch (s) {
    case kStarting: return "starting";
    case kWarm: return "warm";
    case kActive: return "active";
    case kDraining: return "draining";
    case kStandby: return "standby";
    default: return "unknown";
  }
}

void validate(const ReplayOptions& o) {
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  if (o.replicas_min < 1) fail("replicas-min must be >= 1 (a fleet of zero cannot serve the trace)");
  if (o.replicas_max > 10000) fail("replicas-max above 10000 is not a fleet this tool models");
  if (o.replicas_min > o.replicas_max) fail("replicas-min must not exceed replicas-max");
  if (!(o.slo.ttft_s > 0) || o.slo.ttft_s > 3600) fail("slo-ttft-ms must be in (0, 3600000]");
  if (!(o.slo.e2e_s > 0) || o.slo.e2e_s > 86400) fail("slo-e2e-ms must be in (0, 86400000]");
  if (!(o.slo.attainment > 0) || o.slo.attainment > 1) fail("slo attainment must be in (0, 1]");
  if (!(o.profile.cold_start_s >= 0) || o.profile.cold_start_s > 7200) fail("cold_start_s must be in [0, 7200]");
  if (!(o.profile.warm_promotion_s >= 0) || o.profile.warm_promotion_s > 3600)
    fail("warm_promotion_s must be in [0, 3600]");
  if (!(o.profile.usd_per_gpu_hour >= 0) || o.profile.usd_per_gpu_hour > 1000) fail("usd_per_gpu_hour must be in [0, 1000]");
  if (o.profile.gpus_per_replica < 1 || o.profile.gpus_per_replica > 64) fail("gpus_per_replica must be in [1, 64]");
  if (!(o.profile.capacity_per_replica > 0) || o.profile.capacity_per_replica > 1e6)
    fail("capacity_per_replica must be in (0, 1e6]");
  if (o.profile.slots_per_replica < 1 || o.profile.slots_per_replica > 100000)
    fail("slots_per_replica must be in [1, 100000]");
  if (o.profile.tiers.size() > 1) fail("profile.tiers: one standby tier at most");
  for (const auto& tier : o.profile.tiers) {
    if (!(tier.price_fraction >= 0) || tier.price_fraction > 10) fail("tier " + tier.name + ": price_fraction must be in [0, 10]");
    if (!(tier.promotion_s >= 0) || tier.promotion_s > 7200) fail("tier " + tier.name + ": promotion must be in [0, 7200] s");
  }
  if (!(o.sample_period_s > 0) || o.sample_period_s > 60) fail("sample period must be in (0, 60] s");
  if (o.initial_active < 0 || o.initial_active > o.replicas_max) fail("initial replicas must be in [0, replicas-max]");
  if (!(o.warmup_s >= 0) || o.warmup_s > 86400) fail("warmup must be in [0, 86400] s");
  if (!(o.timeline_period_s >= o.sample_period_s)) fail("timeline period must be >= the sample period");
  if (!(o.prefix_aware.load_bound >= 1) || o.prefix_aware.load_bound > 100)
    fail("prefix_aware load_bound must be in [1, 100] (1 + epsilon of the bounded-load rule)");
}

ReplayResult run_replay(const Trace& trace, ScalingPolicy& policy, const ReplayOptions& options) {
  validate(options);
  return Run(trace, policy, options).execute();
}

}  // namespace tidegate::replay
