#include "workload.h"

#include <cmath>

namespace tidegate::cost::demo {

const char* const kDemoConfig = R"(
replica_classes:
  h100: {usd_per_hour: 4.0}
  a10g-spot: {usd_per_hour: 1.1, state_fraction: {warm: 0.6}}
models: {llama-3-8b: h100}
tags: {labels: [team], values: {team: [ml, search, web]}}
cache_lookup_usd: 0.00001
reporting: {live_step: 5s, live_points: 120}
)";

namespace {
const char* const kTenants[] = {"acme", "globex", "initech"};
const char* const kTeams[] = {"ml", "search", "web"};
constexpr const char* kModel = "llama-3-8b";
}  // namespace

Workload::Workload(CostAccounting& acc, double t0) : acc_(acc), t_(t0) {
  active_ = {"llama-a", "llama-b"};
  warm_ = {"llama-w1", "llama-w2"};
  for (const auto& r : active_) acc_.replica_state(r, kModel, "", ReplicaState::kActive, t0);
  for (const auto& r : warm_) acc_.replica_state(r, kModel, "a10g-spot", ReplicaState::kWarm, t0);
}

void Workload::advance_to(double t) {
  while (t_ + 0.5 <= t) {
    t_ += 0.5;
    tick(t_);
  }
}

void Workload::tick(double t) {
  ++ticks_;
  auto uni = [&] { return std::uniform_real_distribution<double>(0, 1)(rng_); };
  // Load follows a slow wave so the charts move; a burst every few minutes promotes a warm replica.
  const double load = 0.6 + 0.5 * std::sin(static_cast<double>(ticks_) / 90.0);
  if (ticks_ % 360 == 120 && !warm_.empty()) {
    active_.push_back(warm_.back());
    warm_.pop_back();
    acc_.replica_state(active_.back(), kModel, "a10g-spot", ReplicaState::kActive, t);
  } else if (ticks_ % 360 == 300 && active_.size() > 2) {
    acc_.replica_state(active_.back(), kModel, "a10g-spot", ReplicaState::kWarm, t);
    warm_.push_back(active_.back());
    active_.pop_back();
  }
  for (int tenant = 0; tenant < 3; ++tenant) {
    if (uni() < load * (0.9 - 0.25 * tenant)) {
      const RequestLabels labels{kModel, kTenants[tenant], "key-" + std::string(kTenants[tenant]),
                                 {{"team", kTeams[tenant]}}};
      if (uni() < 0.25) {
        acc_.cache_hit(labels, 200, 150, t, nullptr);
        continue;
      }
      const auto& replica = active_[static_cast<std::size_t>(rng_() % active_.size())];
      live_.push_back({acc_.request_started(labels, replica, t), static_cast<std::int64_t>(100 + rng_() % 900),
                       static_cast<std::int64_t>(50 + rng_() % 400), 0, tenant});
    }
  }
  for (std::size_t i = 0; i < live_.size();) {
    auto& l = live_[i];
    l.produced = std::min(l.completion, l.produced + 30);
    acc_.request_progress(l.handle, l.prompt, l.produced, t);
    if (l.produced >= l.completion) {
      acc_.request_finished(l.handle, t);
      live_[i] = live_.back();
      live_.pop_back();
    } else {
      ++i;
    }
  }
}

}  // namespace tidegate::cost::demo
