#include "replica_pool.h"

#include <algorithm>

namespace tidegate::gateway {
namespace {
std::atomic<std::uint64_t> g_serial{1};
}

ReplicaPool::ReplicaPool(const ModelConfig& config, std::uint64_t seed)
    : model_(config.name), config_(config), queue_(config.queue.max_length),
      balancer_(seed ? seed : std::random_device{}()), sessions_(config.affinity.enabled() ? config.affinity.max_sessions : 0) {
  for (const auto& r : config.replicas) add(r, true);
}

void ReplicaPool::update_config(const ModelConfig& config) {
  std::vector<std::string> gone;
  {
    std::lock_guard lock(mu_);
    const bool index_resized = config.prefix.index_blocks() != config_.prefix.index_blocks() ||
                               config.balancer != config_.balancer;
    config_ = config;
    queue_.set_max_length(config.queue.max_length);
    sessions_.set_capacity(config.affinity.enabled() ? config.affinity.max_sessions : 0);
    // SIGHUP changing the balancer or the index size starts every index afresh.
    if (index_resized)
      for (auto& r : replicas_) r->prefixes = routing::PrefixIndex(index_blocks());
    for (const auto& r : replicas_) {
      if (!r->from_config) continue;
      const bool kept = std::any_of(config.replicas.begin(), config.replicas.end(),
                                    [&](const ReplicaConfig& c) { return c.id == r->id; });
      if (!kept) gone.push_back(r->id);
    }
  }
  for (const auto& r : config.replicas) add(r, true);
  // Removed from config: stop routing, forget once in-flight requests are done.
  for (const auto& id : gone)
    drain(id, [weak = weak_from_this(), id] {
      if (auto self = weak.lock()) self->remove(id);
    });
}

bool ReplicaPool::routable(const Replica& r) const {
  return !r.draining && !r.removed && r.health != ReplicaHealth::kEjected;
}

bool ReplicaPool::any_routable_locked() const {
  return std::any_of(replicas_.begin(), replicas_.end(), [&](const ReplicaPtr& r) { return routable(*r); });
}

ReplicaPtr ReplicaPool::pick_locked(std::span<const std::uint64_t> exclude, RouteHint* hint) {
  candidates_.clear();
  candidate_index_.clear();
  for (std::size_t i = 0; i < replicas_.size(); ++i) {
    const auto& r = *replicas_[i];
    if (!routable(r) || r.outstanding >= config_.max_concurrency_per_replica ||
        std::find(exclude.begin(), exclude.end(), r.serial) != exclude.end())
      continue;
    // The prefix match only where it is used: pick_prefix_aware_locked reads it.
    const bool match = hint && config_.balancer == BalancerKind::kPrefixAware;
    candidates_.push_back(Candidate{r.outstanding, r.weight, match ? r.prefixes.match(hint->blocks) : 0});
    candidate_index_.push_back(i);
  }
  if (candidates_.empty()) return nullptr;
  const bool prefix_aware = hint && config_.balancer == BalancerKind::kPrefixAware;
  const int i = hint && (prefix_aware || hint->session) ? pick_prefix_aware_locked(*hint)
                                                        : balancer_.pick(config_.balancer, candidates_);
  if (i < 0) return nullptr;
  auto& chosen = replicas_[candidate_index_[static_cast<std::size_t>(i)]];
  chosen->outstanding++;
  if (prefix_aware) {
    hint->new_blocks = candidates_[static_cast<std::size_t>(i)].matched_blocks < hint->blocks.size();
    chosen->prefixes.insert(hint->blocks);
  }
  if (hint && hint->session) {
    hint->new_pin = hint->reason != "affinity";  // affinity: the session was pinned here already
    sessions_.pin(hint->session, chosen->serial);
  }
  return chosen;
}

// Session affinity first (the session's replica, while routable with a free slot and within
// the load bound), then the longest prefix match within the bound (routing/README.md); the
// plain balancer when the pool does not route on prefixes.
int ReplicaPool::pick_prefix_aware_locked(RouteHint& hint) {
  const bool prefix_aware = config_.balancer == BalancerKind::kPrefixAware;
  routing::PrefixAwareConfig cfg;
  cfg.load_bound = config_.prefix.load_bound;
  cfg.min_match_blocks = config_.prefix.min_match_blocks;
  if (hint.session) {
    if (const auto pinned = sessions_.find(hint.session)) {
      for (std::size_t k = 0; k < candidate_index_.size(); ++k)
        if (replicas_[candidate_index_[k]]->serial == pinned && routing::within_load_bound(cfg, candidates_, k)) {
          hint.reason = "affinity";
          hint.matched_blocks = candidates_[k].matched_blocks;
          return static_cast<int>(k);
        }
    }
  }
  if (!prefix_aware) {
    hint.reason = {};
    return balancer_.pick(config_.balancer, candidates_);
  }
  const auto choice = routing::choose_prefix_aware(cfg, candidates_, balancer_.random());
  hint.reason = routing::to_string(choice.reason);
  hint.matched_blocks = choice.matched_blocks;
  return choice.index;
}

std::size_t ReplicaPool::index_blocks() const {
  return config_.balancer == BalancerKind::kPrefixAware ? config_.prefix.index_blocks() : 0;
}

void ReplicaPool::forget_locked(Replica& r) {
  r.prefixes.clear();
  sessions_.forget_replica(r.serial);
}

bool ReplicaPool::learn(const std::string& id, std::span<const std::uint64_t> blocks, std::uint64_t session) {
  std::lock_guard lock(mu_);
  const auto it = std::find_if(replicas_.begin(), replicas_.end(),
                               [&](const ReplicaPtr& r) { return r->id == id; });
  // Not an ejected or draining one: its cache may be gone, and this gateway forgot its entries.
  if (it == replicas_.end() || !routable(**it)) return false;
  bool applied = false;
  if (!blocks.empty() && config_.balancer == BalancerKind::kPrefixAware) {
    (*it)->prefixes.insert(blocks);
    applied = true;
  }
  if (session && config_.affinity.enabled()) {
    sessions_.pin(session, (*it)->serial);
    applied = true;
  }
  return applied;
}

ReplicaPool::Acquired ReplicaPool::acquire(Grant on_grant, std::shared_ptr<RouteHint> hint) {
  std::lock_guard lock(mu_);
  if (!any_routable_locked() && !config_.queue.hold_when_empty) return {Status::kNoReplica, nullptr, 0};
  // FIFO fairness: newcomers do not overtake waiters.
  if (queue_.empty()) {
    if (auto r = pick_locked({}, hint.get())) return {Status::kGranted, std::move(r), 0};
  }
  const auto ticket = queue_.push(Waiter{std::move(on_grant), std::move(hint)}, Clock::now());
  if (!ticket) return {Status::kQueueFull, nullptr, 0};
  return {Status::kQueued, nullptr, *ticket};
}

ReplicaPtr ReplicaPool::try_acquire(std::span<const std::uint64_t> exclude, RouteHint* hint) {
  std::lock_guard lock(mu_);
  return pick_locked(exclude, hint);
}

bool ReplicaPool::cancel(std::uint64_t ticket) {
  std::lock_guard lock(mu_);
  return queue_.remove(ticket, Clock::now());
}

void ReplicaPool::dispatch_locked(std::vector<std::pair<Grant, ReplicaPtr>>& grants) {
  while (!queue_.empty()) {
    // The head's hint decides where it goes; peeked before the pop, as the pick may fail.
    auto r = pick_locked({}, queue_.front().hint.get());
    if (!r) break;
    auto waiter = queue_.pop(Clock::now());
    grants.emplace_back(std::move(waiter->grant), std::move(r));
  }
}

void ReplicaPool::run(std::vector<std::pair<Grant, ReplicaPtr>>& grants, std::vector<std::function<void()>>& drained) {
  for (auto& [grant, replica] : grants) grant(std::move(replica));
  for (auto& cb : drained) cb();
}

void ReplicaPool::release(const ReplicaPtr& replica, Outcome outcome) {
  std::vector<std::pair<Grant, ReplicaPtr>> grants;
  std::vector<std::function<void()>> drained;
  {
    std::lock_guard lock(mu_);
    replica->outstanding--;
    apply_outcome_locked(*replica, outcome);
    if (replica->draining && replica->outstanding == 0 && replica->on_drained) {
      drained.push_back(std::move(replica->on_drained));
      replica->on_drained = nullptr;
    }
    dispatch_locked(grants);
  }
  run(grants, drained);
}

void ReplicaPool::apply_outcome_locked(Replica& replica, Outcome outcome) {
  if (outcome == Outcome::kSuccess) {
    replica.consecutive_failures = 0;
    if (replica.health == ReplicaHealth::kUnknown) replica.health = ReplicaHealth::kHealthy;
  } else if (outcome == Outcome::kFailure) {
    // Without probes nothing could re-admit an ejected replica, so passive ejection needs them.
    if (++replica.consecutive_failures >= config_.health.failures_to_eject && config_.health.interval_s > 0) {
      if (replica.health != ReplicaHealth::kEjected) forget_locked(replica);
      replica.health = ReplicaHealth::kEjected;
    }
  }
}

void ReplicaPool::blame(const ReplicaPtr& replica) {
  std::lock_guard lock(mu_);
  apply_outcome_locked(*replica, Outcome::kFailure);
}

void ReplicaPool::on_new_replica(NewReplicaHook hook) {
  std::vector<ReplicaPtr> existing;
  {
    std::lock_guard lock(mu_);
    new_replica_hook_ = hook;
    existing = replicas_;
  }
  if (hook)
    for (const auto& r : existing) hook(r);
}

void ReplicaPool::add(const ReplicaConfig& rc, bool from_config) {
  std::vector<std::pair<Grant, ReplicaPtr>> grants;
  std::vector<std::function<void()>> drained;
  ReplicaPtr fresh;
  NewReplicaHook hook;
  {
    std::lock_guard lock(mu_);
    auto it = std::find_if(replicas_.begin(), replicas_.end(), [&](const ReplicaPtr& r) { return r->id == rc.id; });
    // A new key is a new replica too: sessions read api_key without the lock.
    if (it != replicas_.end() && (*it)->host == rc.host && (*it)->port == rc.port && (*it)->api_key == rc.api_key) {
      (*it)->weight = rc.weight;
      (*it)->draining = false;  // re-activated before it finished draining
      (*it)->on_drained = nullptr;
      (*it)->from_config = (*it)->from_config || from_config;
    } else {
      if (it != replicas_.end()) {  // same id, new address or key: the old one finishes on its own
        (*it)->removed = true;
        replicas_.erase(it);
      }
      auto r = std::make_shared<Replica>();
      r->id = rc.id;
      r->host = rc.host;
      r->port = rc.port;
      // An IPv6 literal goes in brackets (RFC 7230 section 5.4); config keeps it bare.
      const bool v6 = rc.host.find(':') != std::string::npos;
      r->authority = (v6 ? "[" + rc.host + "]" : rc.host) + ":" + std::to_string(rc.port);
      r->weight = rc.weight;
      r->replica_class = rc.replica_class;
      r->api_key = rc.api_key;
      r->from_config = from_config;
      r->serial = g_serial.fetch_add(1);
      r->prefixes = routing::PrefixIndex(index_blocks());
      fresh = r;
      hook = new_replica_hook_;
      replicas_.push_back(std::move(r));
    }
    dispatch_locked(grants);
  }
  if (fresh && hook) hook(fresh);
  run(grants, drained);
}

void ReplicaPool::drain(const std::string& id, std::function<void()> on_drained) {
  std::function<void()> now;
  {
    std::lock_guard lock(mu_);
    auto it = std::find_if(replicas_.begin(), replicas_.end(), [&](const ReplicaPtr& r) { return r->id == id; });
    if (it == replicas_.end()) {
      now = std::move(on_drained);
    } else {
      (*it)->draining = true;
      if ((*it)->outstanding == 0) now = std::move(on_drained);
      else (*it)->on_drained = std::move(on_drained);
    }
  }
  if (now) now();
}

void ReplicaPool::remove(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = std::find_if(replicas_.begin(), replicas_.end(), [&](const ReplicaPtr& r) { return r->id == id; });
  if (it == replicas_.end()) return;
  (*it)->removed = true;
  forget_locked(**it);
  replicas_.erase(it);
}

void ReplicaPool::report_probe(const std::string& id, bool ok) {
  std::vector<std::pair<Grant, ReplicaPtr>> grants;
  std::vector<std::function<void()>> drained;
  {
    std::lock_guard lock(mu_);
    auto it = std::find_if(replicas_.begin(), replicas_.end(), [&](const ReplicaPtr& r) { return r->id == id; });
    if (it == replicas_.end()) return;
    auto& r = **it;
    if (ok) {
      r.health = ReplicaHealth::kHealthy;  // re-admission after ejection
      r.consecutive_failures = 0;
    } else if (++r.consecutive_failures >= config_.health.failures_to_eject) {
      if (r.health != ReplicaHealth::kEjected) forget_locked(r);  // it may come back restarted
      r.health = ReplicaHealth::kEjected;
    }
    dispatch_locked(grants);
  }
  run(grants, drained);
}

std::vector<ReplicaPtr> ReplicaPool::replicas() const {
  std::lock_guard lock(mu_);
  return replicas_;
}

scaler::GatewaySignals ReplicaPool::sample() const {
  std::lock_guard lock(mu_);
  scaler::GatewaySignals s;
  s.queue_depth = queue_.size();
  s.queue_wait_p90_s = queue_.recent_wait_quantile(0.9);
  s.oldest_wait_s = queue_.oldest_wait_s(Clock::now());
  for (const auto& r : replicas_) {
    s.in_flight += static_cast<std::size_t>(r->outstanding);
    s.in_flight_by_replica[r->id] = static_cast<std::size_t>(r->outstanding);
    s.replica_healthy[r->id] = r->health != ReplicaHealth::kEjected;
  }
  s.arrivals_total = arrivals_.load(std::memory_order_relaxed);
  s.arrival_prompt_tokens_total = arrival_tokens_.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < prompt_sizes_.size(); ++i) s.prompt_sizes_total[i] = prompt_sizes_[i].load(std::memory_order_relaxed);
  s.queued_prompt_tokens = static_cast<std::uint64_t>(std::max<std::int64_t>(0, queued_tokens_.load(std::memory_order_relaxed)));
  s.ttft_total = ttft_n_.load(std::memory_order_relaxed);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < ttft_in_.size(); ++i)
    s.ttft_le_total[i] = cumulative += ttft_in_[i].load(std::memory_order_relaxed);
  return s;
}

void ReplicaPool::note_arrival(std::uint64_t tokens) {
  arrivals_.fetch_add(1, std::memory_order_relaxed);
  arrival_tokens_.fetch_add(tokens, std::memory_order_relaxed);
  prompt_sizes_[static_cast<std::size_t>(scaler::PromptSizes::bucket_of(static_cast<double>(tokens)))].fetch_add(
      1, std::memory_order_relaxed);
}

void ReplicaPool::note_queued(std::int64_t tokens) { queued_tokens_.fetch_add(tokens, std::memory_order_relaxed); }

void ReplicaPool::note_first_token(double seconds) {
  ttft_n_.fetch_add(1, std::memory_order_relaxed);
  if (seconds < 0) return;
  const auto* b = std::lower_bound(scaler::kTtftBounds.begin(), scaler::kTtftBounds.end(), seconds);
  if (b != scaler::kTtftBounds.end())
    ttft_in_[static_cast<std::size_t>(b - scaler::kTtftBounds.begin())].fetch_add(1, std::memory_order_relaxed);
}

bool ReplicaPool::ready() const {
  std::lock_guard lock(mu_);
  const bool probes = config_.health.interval_s > 0;
  return std::any_of(replicas_.begin(), replicas_.end(), [&](const ReplicaPtr& r) {
    return routable(*r) && (r->health == ReplicaHealth::kHealthy || !probes);
  });
}

ReplicaPool::StateCounts ReplicaPool::state_counts() const {
  std::lock_guard lock(mu_);
  StateCounts c;
  for (const auto& r : replicas_) {
    if (r->draining) c.draining++;
    else if (r->health == ReplicaHealth::kHealthy) c.healthy++;
    else if (r->health == ReplicaHealth::kEjected) c.ejected++;
    else c.unknown++;
  }
  return c;
}

std::size_t ReplicaPool::queue_depth() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

HealthConfig ReplicaPool::health_config() const {
  std::lock_guard lock(mu_);
  return config_.health;
}

}  // namespace tidegate::gateway
