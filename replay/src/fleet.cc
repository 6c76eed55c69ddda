#include "fleet.h"

#include <algorithm>
#include <limits>

#include "router.h"

namespace tidegate::replay::detail {

Fleet::Fleet(const ReplayOptions& options, std::int32_t prefix_block_tokens)
    : opt_(options), params_(options.profile.timing) {
  params_.startup_s = options.profile.cold_start_s;  // the sim's own model-load phase
  params_.emit_token_events = false;                // a replay needs first token and finish only
  if (prefix_block_tokens > 0) params_.prefix_block_tokens = prefix_block_tokens;
  index_blocks_ = router_index_blocks(options, params_, prefix_block_tokens);
}

void Fleet::set_state(Replica& r, StateIndex s, double t) {
  // A parked replica bills its tier's share of a GPU-hour.
  const double price = r.state == kStandby && !opt_.profile.tiers.empty() ? opt_.profile.tiers.front().price_fraction : 1.0;
  gpu_seconds_[r.state] += (t - r.state_since) * opt_.profile.gpus_per_replica * price;
  r.state = s;
  r.state_since = t;
}

Replica& Fleet::start_cold(double t, bool for_warm) {
  auto r = std::make_unique<Replica>();
  r->id = next_id_++;
  r->state = kStarting;
  r->for_warm = for_warm;
  r->state_since = t;
  r->engine = std::make_unique<sim::TimingModel>(params_, t);
  r->routed_prefixes = routing::PrefixIndex(index_blocks_);
  r->ready_at = r->engine->ready_at();
  replicas_.push_back(std::move(r));
  ++scale_events_;
  max_replicas_ = std::max(max_replicas_, static_cast<int>(replicas_.size()));
  return *replicas_.back();
}

void Fleet::add_ready(int n, double t) {
  for (int i = 0; i < n; ++i) {
    auto r = std::make_unique<Replica>();
    r->id = next_id_++;
    r->state = kActive;
    r->state_since = t;
    // Loading began a cold start earlier, so the engine is ready exactly at t.
    r->engine = std::make_unique<sim::TimingModel>(params_, t - params_.startup_s);
    r->routed_prefixes = routing::PrefixIndex(index_blocks_);
    r->ready_at = t;
    replicas_.push_back(std::move(r));
  }
  max_replicas_ = std::max(max_replicas_, static_cast<int>(replicas_.size()));
}

sim::PrefixCacheStats Fleet::prefix_cache_totals() const {
  auto total = stopped_prefix_;
  for (const auto& r : replicas_) {
    const auto s = r->engine->prefix_cache_stats();
    total.queries_tokens += s.queries_tokens;
    total.hits_tokens += s.hits_tokens;
    total.evicted_tokens += s.evicted_tokens;
    total.resident_tokens += s.resident_tokens;
  }
  return total;
}

void Fleet::stop(std::size_t index, double t) {
  set_state(*replicas_[index], replicas_[index]->state, t);  // bill up to t
  const auto s = replicas_[index]->engine->prefix_cache_stats();
  stopped_prefix_.queries_tokens += s.queries_tokens;
  stopped_prefix_.hits_tokens += s.hits_tokens;
  stopped_prefix_.evicted_tokens += s.evicted_tokens;
  replicas_.erase(replicas_.begin() + static_cast<std::ptrdiff_t>(index));
}

int Fleet::count(StateIndex s) const {
  return static_cast<int>(std::count_if(replicas_.begin(), replicas_.end(), [s](const auto& r) { return r->state == s; }));
}

int Fleet::starting_for_active() const {
  return static_cast<int>(std::count_if(replicas_.begin(), replicas_.end(),
                                        [](const auto& r) { return r->state == kStarting && !r->for_warm; }));
}

int Fleet::promoting() const {
  return static_cast<int>(std::count_if(replicas_.begin(), replicas_.end(), [](const auto& r) { return r->promoting; }));
}

void Fleet::complete_transitions(double t) {
  for (auto& r : replicas_) {
    if (r->state != kStarting || r->ready_at > t) continue;
    r->promoting = false;
    r->waking = false;
    set_state(*r, r->for_warm ? kWarm : kActive, r->ready_at);
  }
}

double Fleet::next_transition() const {
  double next = std::numeric_limits<double>::infinity();
  for (const auto& r : replicas_)
    if (r->state == kStarting) next = std::min(next, r->ready_at);
  return next;
}

void Fleet::retire_idle_draining(double t) {
  for (std::size_t i = replicas_.size(); i-- > 0;) {
    auto& r = *replicas_[i];
    if (r.state != kDraining || r.in_flight != 0) continue;
    if (r.on_drained) {
      auto cb = std::move(r.on_drained);
      r.on_drained = nullptr;
      cb();
    } else if (!r.for_warm) {  // for_warm marks a controller-owned replica awaiting remove()
      stop(i, t);
    }
  }
}

Replica* Fleet::find(int id) {
  for (auto& r : replicas_)
    if (r->id == id) return r.get();
  return nullptr;
}

void Fleet::stop_id(int id, double t) {
  for (std::size_t i = 0; i < replicas_.size(); ++i)
    if (replicas_[i]->id == id) {
      stop(i, t);
      ++scale_events_;
      return;
    }
}

void Fleet::activate(Replica& r, double t) {
  if (r.state == kDraining && r.on_drained) {  // still emptying after adoption: route it again
    r.on_drained = nullptr;
    r.for_warm = false;
    set_state(r, kActive, t);
    return;
  }
  if (r.state != kWarm) return;  // already routed (or still loading: the controller waits for ready)
  if (r.woken) {  // a tier's promotion time is to routed: nothing more to wait for
    r.woken = false;
    r.for_warm = false;
    set_state(r, kActive, t);
    ++scale_events_;
    return;
  }
  set_state(r, kStarting, t);
  r.promoting = true;
  r.for_warm = false;
  r.ready_at = t + opt_.profile.warm_promotion_s;
  ++scale_events_;
}

void Fleet::drain(Replica& r, double t, std::function<void()> on_drained) {
  if (r.state == kStarting && r.promoting) r.promoting = false;  // promotion cancelled
  set_state(r, kDraining, t);
  r.for_warm = true;  // owned by the controller: kept until remove()/stop()
  r.on_drained = std::move(on_drained);
  ++scale_events_;
}

void Fleet::unroute(Replica& r, double t) {
  if (r.state == kDraining && r.in_flight == 0) set_state(r, kWarm, t);
}

bool Fleet::park(Replica& r, double t) {
  if (opt_.profile.tiers.empty() || r.state != kWarm) return false;
  set_state(r, kStandby, t);
  ++scale_events_;
  return true;
}

bool Fleet::wake(Replica& r, double t) {
  if (r.state != kStandby) return false;
  set_state(r, kStarting, t);  // billed in full while the weights come back
  r.waking = true;
  r.woken = true;
  r.for_warm = true;
  r.ready_at = t + opt_.profile.tiers.front().promotion_s;
  ++scale_events_;
  return true;
}

void Fleet::apply(ScaleTarget target, double t) {
  const int want_active = std::clamp(target.active, opt_.replicas_min, opt_.replicas_max);
  const int want_warm = std::clamp(target.warm, 0, opt_.replicas_max - want_active);

  int active_bound = count(kActive) + starting_for_active();
  // Scale up: promote warm replicas first (seconds), then redirect warm-bound cold starts,
  // then cold-start the rest.
  for (auto& r : replicas_) {
    if (active_bound >= want_active) break;
    if (r->state == kWarm) {
      set_state(*r, kStarting, t);
      r->promoting = true;
      r->for_warm = false;
      r->ready_at = t + opt_.profile.warm_promotion_s;
      ++scale_events_;
      ++active_bound;
    }
  }
  for (auto& r : replicas_) {
    if (active_bound >= want_active) break;
    if (r->state == kStarting && r->for_warm) {
      r->for_warm = false;
      ++active_bound;
    }
  }
  while (active_bound < want_active) {
    start_cold(t, false);
    ++active_bound;
  }

  // Scale down: cold starts still loading become warm-pool members (or are cancelled), then
  // the least-loaded active replicas drain.
  int warm_bound = count(kWarm) + static_cast<int>(std::count_if(replicas_.begin(), replicas_.end(), [](const auto& r) {
                     return r->state == kStarting && r->for_warm;
                   }));
  for (std::size_t i = replicas_.size(); i-- > 0 && active_bound > want_active;) {
    auto& r = *replicas_[i];
    if (r.state != kStarting || r.for_warm || r.promoting) continue;
    --active_bound;
    if (warm_bound < want_warm) {
      r.for_warm = true;
      ++warm_bound;
    } else {
      stop(i, t);
      ++scale_events_;
    }
  }
  while (active_bound > want_active) {
    Replica* victim = nullptr;
    for (auto& r : replicas_)
      if (r->state == kActive && (!victim || r->in_flight < victim->in_flight)) victim = r.get();
    if (!victim) break;  // only promotions left; they complete and are trimmed next time
    set_state(*victim, kDraining, t);
    ++scale_events_;
    --active_bound;
  }

  // Warm pool: idle warm replicas stop before loading ones are cancelled.
  while (warm_bound < want_warm) {
    start_cold(t, true);
    ++warm_bound;
  }
  for (std::size_t i = replicas_.size(); i-- > 0 && warm_bound > want_warm;) {
    if (replicas_[i]->state == kWarm) {
      stop(i, t);
      ++scale_events_;
      --warm_bound;
    }
  }
  for (std::size_t i = replicas_.size(); i-- > 0 && warm_bound > want_warm;) {
    if (replicas_[i]->state == kStarting && replicas_[i]->for_warm) {
      stop(i, t);
      ++scale_events_;
      --warm_bound;
    }
  }
  retire_idle_draining(t);
}

void Fleet::close(double t) {
  for (std::size_t i = replicas_.size(); i-- > 0;) {
    // A cold start still loading: what stopping it bills now is what it cost without serving.
    const bool unready = replicas_[i]->state == kStarting && !replicas_[i]->promoting;
    const double billed = gpu_seconds_[kStarting];
    stop(i, t);
    if (unready) unready_at_close_s_ += gpu_seconds_[kStarting] - billed;
  }
}

}  // namespace tidegate::replay::detail
