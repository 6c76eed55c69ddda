#include "tidegate/scaler/lifecycle.h"

#include <algorithm>
#include <map>

#include "tidegate/common/log.h"

namespace tidegate::scaler {
namespace {

constexpr std::size_t kEventsKept = 100;
constexpr std::size_t kTombstonesKept = 1000;

}  // namespace

PoolController::PoolController(std::string model, std::string replica_class, LifecycleConfig config,
                               Actuator& actuator, RoutingTarget& routing, StateListener listener)
    : model_(std::move(model)),
      class_(std::move(replica_class)),
      config_(config),
      actuator_(actuator),
      routing_(routing),
      listener_(std::move(listener)) {}

PoolController::~PoolController() = default;

void PoolController::set_state(Record& r, ReplicaState s, double now) {
  if (r.info.state == s && r.info.since != 0) return;
  r.info.state = s;
  r.info.since = now;
  if (r.info.placeholder) return;  // not a replica yet: nothing to charge
  log::info("scaler.replica_state", {{"model", model_}, {"replica", r.info.id}, {"state", to_string(s)}});
  if (listener_) listener_(r.info.id, model_, class_, s, now);
}

void PoolController::report(double now, const std::string& id, const std::string& kind, const std::string& detail) {
  log::warn("scaler.replica_fault", {{"model", model_}, {"replica", id}, {"kind", kind}, {"detail", detail}});
  events_.push_back({now, id, kind, detail});
  while (events_.size() > kEventsKept) events_.pop_front();
}

void PoolController::stop_replica(Record& r, double now, bool routed) {
  if (routed) routing_.remove(model_, r.info.id);
  actuator_.stop(r.info.id);
  if (!r.info.placeholder) {
    tombstones_.insert(r.info.id);
    if (tombstones_.size() > kTombstonesKept) tombstones_.erase(tombstones_.begin());
  }
  set_state(r, ReplicaState::kStopped, now);
}

void PoolController::forget_stopped() {
  std::erase_if(records_, [](const Record& r) { return r.info.state == ReplicaState::kStopped; });
}

void PoolController::reconcile(double now, const PoolObservation& obs) {
  std::map<std::string, const ObservedReplica*> seen;
  for (const auto& o : obs.replicas)
    if (!tombstones_.count(o.id)) seen[o.id] = &o;

  for (auto& r : records_) {
    if (r.info.placeholder || r.info.state == ReplicaState::kStopped) continue;
    const auto it = seen.find(r.info.id);
    const ObservedReplica* o = it == seen.end() ? nullptr : it->second;
    if (it != seen.end()) seen.erase(it);
    if (o && !o->exited) {
      r.info.endpoint = o->endpoint;
      r.info.leaving = o->draining;
      if (o->ready && r.info.state == ReplicaState::kStarting) {
        const double took = now - r.info.created;
        // A wake-up is not a cold start: only new replicas teach the start-up time.
        if (took > 0 && !r.info.waking) startup_s_ = startup_s_ ? 0.7 * *startup_s_ + 0.3 * took : took;
        r.info.waking = false;
        set_state(r, ReplicaState::kWarm, now);
      }
      continue;
    }
    // Gone: a crash, an OOM kill, a deleted pod. Its queued requests go elsewhere. One the
    // leader was draining is the leader's scale-down ending, not a fault.
    const std::string detail = o ? o->detail : "no longer listed by the actuator";
    const bool routed = r.info.state == ReplicaState::kActive || r.info.state == ReplicaState::kDraining;
    if (!r.info.leaving) {
      report(now, r.info.id, r.info.state == ReplicaState::kStarting ? "died_starting" : "died", detail);
      if (r.info.state == ReplicaState::kActive || r.info.state == ReplicaState::kWarm) ++replaced_;
    }
    stop_replica(r, now, routed);
  }

  // New replicas, oldest placeholder adopted first so the startup timeout keeps its start.
  std::vector<Record*> placeholders;
  for (auto& r : records_)
    if (r.info.placeholder && r.info.state == ReplicaState::kStarting) placeholders.push_back(&r);
  std::sort(placeholders.begin(), placeholders.end(),
            [](const Record* a, const Record* b) { return a->info.created < b->info.created; });
  std::size_t adopted = 0;
  std::vector<Record> fresh;
  for (const auto& [id, o] : seen) {
    if (o->exited) continue;
    Record r;
    r.info.id = id;
    r.info.endpoint = o->endpoint;
    r.info.created = now;
    if (adopted < placeholders.size()) r.info.created = placeholders[adopted++]->info.created;
    fresh.push_back(std::move(r));
  }
  for (std::size_t i = 0; i < adopted; ++i) placeholders[i]->info.state = ReplicaState::kStopped;
  for (auto& r : fresh) {
    set_state(r, ReplicaState::kStarting, now);
    if (seen.at(r.info.id)->ready) set_state(r, ReplicaState::kWarm, now);
    records_.push_back(std::move(r));
  }
  forget_stopped();

  // Placeholders mirror what the actuator says is pending (only Kubernetes has any).
  int have = 0;
  for (const auto& r : records_) have += r.info.placeholder;
  for (; have > obs.pending; --have) {
    auto it = std::find_if(records_.rbegin(), records_.rend(), [](const Record& r) { return r.info.placeholder; });
    it->info.state = ReplicaState::kStopped;
    forget_stopped();
  }
  for (; have < obs.pending; ++have) {
    Record r;
    r.info.id = "pending-" + std::to_string(++next_placeholder_);
    r.info.placeholder = true;
    r.info.created = r.info.since = now;
    records_.push_back(std::move(r));
  }
}

void PoolController::expire(double now) {
  for (auto& r : records_) {
    if (r.info.state == ReplicaState::kStarting && now - r.info.created > config_.startup_timeout_s) {
      report(now, r.info.id, "startup_timeout",
             "not healthy after " + std::to_string(static_cast<int>(config_.startup_timeout_s)) + "s");
      ++replaced_;
      stop_replica(r, now, false);
    } else if (r.info.state == ReplicaState::kDraining) {
      const bool drained_here = r.drained && r.drained->load();
      const bool held = held_elsewhere_.count(r.info.id) > 0;
      if (!drained_here || held) {
        if (now - r.info.since <= config_.drain_timeout_s) continue;
        report(now, r.info.id, "drain_timeout",
               drained_here ? "another gateway still sends requests to it" : "in-flight requests did not finish");
      }
      routing_.remove(model_, r.info.id);
      r.drained.reset();
      if (r.info.drain_to_warm) {
        r.info.drain_to_warm = false;
        set_state(r, ReplicaState::kWarm, now);
      } else {
        stop_replica(r, now, false);
      }
    }
  }
  forget_stopped();
}

void PoolController::converge(double now, int desired, const GatewaySignals* gateway, int desired_standby) {
  auto of_state = [&](ReplicaState s) {
    std::vector<Record*> out;
    for (auto& r : records_)
      if (r.info.state == s) out.push_back(&r);
    return out;
  };
  auto oldest_first = [](const Record* a, const Record* b) { return a->info.since < b->info.since; };

  if (!actuator_.elastic()) desired = static_cast<int>(records_.size());
  // Warm replicas count within max_replicas: at the ceiling the pool is promoted, not refilled.
  int warm_pool = config_.warm_pool_size;
  if (config_.max_replicas > 0) warm_pool = std::clamp(config_.max_replicas - desired - desired_standby, 0, warm_pool);
  warm_target_ = warm_pool;

  auto active = of_state(ReplicaState::kActive);
  auto warm = of_state(ReplicaState::kWarm);
  std::sort(warm.begin(), warm.end(), oldest_first);
  int n_active = static_cast<int>(active.size());

  // A replica the leader drains (a follower's view) is drained here too: nothing new goes to
  // it, this gateway's requests there finish, and it waits unrouted until the leader stops it.
  for (auto it = active.begin(); it != active.end();) {
    Record& r = **it;
    if (!r.info.leaving) {
      ++it;
      continue;
    }
    r.info.drain_to_warm = true;
    r.drained = std::make_shared<std::atomic<bool>>(false);
    set_state(r, ReplicaState::kDraining, now);
    routing_.drain(model_, r.info.id, [flag = r.drained] { flag->store(true); });
    it = active.erase(it);
    --n_active;
  }
  std::erase_if(warm, [](const Record* r) { return r->info.leaving; });

  // Promote: warm replicas take traffic at once (the point of the pool).
  std::size_t promoted = 0;
  for (; n_active < desired && promoted < warm.size(); ++promoted, ++n_active) {
    routing_.activate(model_, warm[promoted]->info.id, warm[promoted]->info.endpoint);
    set_state(*warm[promoted], ReplicaState::kActive, now);
  }
  if (!actuator_.elastic()) return;
  warm.erase(warm.begin(), warm.begin() + static_cast<std::ptrdiff_t>(promoted));

  // Wake parked replicas for what the warm pool could not cover, before any cold start:
  // they come back in a promotion time, not a cold start. Loads already in progress count.
  auto standby = of_state(ReplicaState::kStandby);
  std::sort(standby.begin(), standby.end(), oldest_first);
  int on_the_way = 0;
  for (const auto& r : records_) on_the_way += r.info.state == ReplicaState::kStarting;
  for (std::size_t i = 0; n_active + on_the_way < desired && i < standby.size(); ++i) {
    if (!actuator_.unpark(standby[i]->info.id)) {
      report(now, standby[i]->info.id, "wake_failed", actuator_.stats().last_error);
      continue;
    }
    standby[i]->info.waking = true;
    standby[i]->info.created = now;  // the startup timeout runs from the wake-up
    set_state(*standby[i], ReplicaState::kStarting, now);
    ++on_the_way;
  }
  standby = of_state(ReplicaState::kStandby);
  std::sort(standby.begin(), standby.end(), oldest_first);

  // Demote or drain the least busy, youngest active replicas first.
  int warm_to_be = 0;
  for (const auto& r : records_)
    warm_to_be += r.info.state == ReplicaState::kWarm || (r.info.state == ReplicaState::kDraining && r.info.drain_to_warm);
  if (n_active > desired) {
    auto busy = [&](const Record* r) -> std::size_t {
      if (!gateway) return 0;
      const auto it = gateway->in_flight_by_replica.find(r->info.id);
      return it == gateway->in_flight_by_replica.end() ? 0 : it->second;
    };
    std::sort(active.begin(), active.end(), [&](const Record* a, const Record* b) {
      return busy(a) != busy(b) ? busy(a) < busy(b) : a->info.since > b->info.since;
    });
    int standby_now = 0;
    for (const auto& r : records_) standby_now += r.info.state == ReplicaState::kStandby;
    for (std::size_t i = 0; n_active > desired && i < active.size(); ++i, --n_active) {
      Record& r = *active[i];
      // Back to the warm pool, or on to standby (parked once drained), when either is short.
      r.info.drain_to_warm = warm_to_be < warm_pool + std::max(0, desired_standby - standby_now);
      warm_to_be += r.info.drain_to_warm;
      r.drained = std::make_shared<std::atomic<bool>>(false);
      set_state(r, ReplicaState::kDraining, now);
      routing_.drain(model_, r.info.id, [flag = r.drained] { flag->store(true); });
    }
  }

  // Park: ready replicas beyond the warm pool go to standby while it is short (a demotion
  // drained to warm is parked once it gets there).
  int n_standby = static_cast<int>(standby.size());
  {
    auto ready = of_state(ReplicaState::kWarm);
    std::sort(ready.begin(), ready.end(), oldest_first);
    int spare = static_cast<int>(ready.size()) - warm_pool;
    for (std::size_t i = 0; spare > 0 && n_standby < desired_standby && i < ready.size(); ++i) {
      if (!actuator_.park(ready[i]->info.id)) break;  // no standby mechanism: they stay warm
      set_state(*ready[i], ReplicaState::kStandby, now);
      --spare;
      --warm_to_be;
      ++n_standby;
    }
  }

  // Supply: active + warm pool + standby, counting what is already on its way.
  int starting = 0;
  for (const auto& r : records_) starting += r.info.state == ReplicaState::kStarting;
  const int need = desired + warm_pool + desired_standby - (n_active + warm_to_be + starting + n_standby);
  if (need > 0) {
    int budget = need;
    if (config_.max_parallel_starts > 0) budget = std::min(budget, std::max(0, config_.max_parallel_starts - starting));
    const int for_active = std::max(0, desired - n_active - starting);
    for (int i = 0; i < budget; ++i) {
      if (!actuator_.start(i >= for_active)) {
        report(now, "", "start_failed", actuator_.stats().last_error);
        break;
      }
    }
  } else if (need < 0) {
    // Surplus: cancel loads still in progress first (nothing ready is lost), then give
    // back ready warm replicas beyond the pool, youngest first.
    auto surplus = of_state(ReplicaState::kStarting);
    std::sort(surplus.begin(), surplus.end(), [](const Record* a, const Record* b) { return a->info.created < b->info.created; });
    auto spare = of_state(ReplicaState::kWarm);
    std::sort(spare.begin(), spare.end(), oldest_first);
    surplus.insert(surplus.begin(), spare.begin(), spare.end());
    // Parked replicas beyond the standby wanted go last (youngest first): they cost least.
    auto parked = of_state(ReplicaState::kStandby);
    std::sort(parked.begin(), parked.end(), oldest_first);
    if (static_cast<int>(parked.size()) > desired_standby)
      surplus.insert(surplus.begin(), parked.begin() + desired_standby, parked.end());
    for (int i = 0; i < -need && !surplus.empty(); ++i) {
      stop_replica(*surplus.back(), now, false);
      surplus.pop_back();
    }
  }
  forget_stopped();
}

void PoolController::replace_unhealthy(double now, const GatewaySignals& gateway) {
  for (auto& r : records_) {
    if (r.info.state != ReplicaState::kActive) continue;
    const auto it = gateway.replica_healthy.find(r.info.id);
    if (it == gateway.replica_healthy.end() || it->second) {
      r.info.unhealthy_since = -1;
      continue;
    }
    if (r.info.unhealthy_since < 0) r.info.unhealthy_since = now;
    if (config_.unhealthy_replace_after_s <= 0 || now - r.info.unhealthy_since < config_.unhealthy_replace_after_s)
      continue;
    report(now, r.info.id, "unhealthy",
           "gateway health checks failing for " + std::to_string(static_cast<int>(now - r.info.unhealthy_since)) + "s");
    ++replaced_;
    stop_replica(r, now, true);
  }
  forget_stopped();
}

void PoolController::step(double now, int desired_active, const GatewaySignals* gateway, int desired_standby) {
  reconcile(now, actuator_.observe());
  expire(now);
  if (gateway) replace_unhealthy(now, *gateway);
  converge(now, std::max(0, desired_active), gateway, std::max(0, desired_standby));
  // A start asked for this tick shows up as a process (or a pending pod) right away.
  reconcile(now, actuator_.observe());
}

void PoolController::shutdown(double now) {
  for (auto& r : records_) {
    if (r.info.state == ReplicaState::kStopped) continue;
    const bool routed = r.info.state == ReplicaState::kActive || r.info.state == ReplicaState::kDraining;
    stop_replica(r, now, routed);
  }
  forget_stopped();
}

int capacity_on_the_way(const PoolCounts& c, int warm_target) {
  const int refills = std::max(0, warm_target - c.warm);
  return std::max(0, c.starting - refills) + std::max(0, c.warm - warm_target);
}

PoolCounts PoolController::counts() const {
  PoolCounts c;
  for (const auto& r : records_) {
    switch (r.info.state) {
      case ReplicaState::kStarting: ++c.starting; break;
      case ReplicaState::kWarm: ++c.warm; break;
      case ReplicaState::kActive: ++c.active; break;
      case ReplicaState::kDraining: ++c.draining; break;
      case ReplicaState::kStandby: ++c.standby; break;
      case ReplicaState::kStopped: break;
    }
  }
  return c;
}

std::vector<ReplicaInfo> PoolController::replicas() const {
  std::vector<ReplicaInfo> out;
  for (const auto& r : records_) out.push_back(r.info);
  return out;
}

}  // namespace tidegate::scaler
