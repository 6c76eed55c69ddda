#include "ledger.h"

#include <algorithm>

namespace tidegate::cost {
namespace {
constexpr double kModelRateAlpha = 0.2;
}

ReplicaState Ledger::state_of(const std::string& id) const {
  const auto it = replicas_.find(id);
  return it == replicas_.end() ? ReplicaState::kStopped : it->second.state;
}

std::size_t Ledger::pending_segments() const {
  std::size_t n = 0;
  for (const auto& [id, r] : replicas_) n += r.pending.size();
  return n;
}

double Ledger::close(Replica& r, double t) {
  if (t < r.t_last) {
    ++stats_.clock_regressions;  // never bill negative time; the interval restarts at t_last
    t = r.t_last;
  }
  const double dt = t - r.t_last;
  if (dt <= 0) return t;
  const double usd = r.rates[static_cast<std::size_t>(r.state)] * dt;
  const bool busy = !r.in_flight.empty();
  sink_.on_bill(r.model, r.cls, r.state, busy, r.t_last, t, usd);
  if (busy) {
    if (usd > 0) {
      Segment s{r.t_last, t, usd, {}};
      s.members.reserve(r.in_flight.size());
      for (const auto h : r.in_flight) s.members.push_back({h, -1.0});
      s.unknown = s.members.size();
      r.pending.push_back(std::move(s));
      stats_.pending_usd += usd;
    }
  } else if (usd > 0) {
    sink_.on_overhead(r.model, r.state == ReplicaState::kActive, r.t_last, t, usd);
  }
  r.t_last = t;
  return t;
}

void Ledger::settle(Segment& s, const std::string& model) {
  const double dt = s.t1 - s.t0;
  std::vector<double> weight(s.members.size(), -1.0);
  double rate_sum = 0;
  int rate_n = 0;
  const auto model_it = model_rates_.find(model);
  const double model_rate = model_it == model_rates_.end() ? -1.0 : model_it->second.work_per_s;
  for (std::size_t i = 0; i < s.members.size(); ++i) {
    const auto& m = s.members[i];
    if (m.work >= 0) {
      weight[i] = m.work;
    } else {
      ++stats_.estimated_members;
      const auto q = requests_.find(m.handle);
      const double rate = (q != requests_.end() && q->second.rate >= 0) ? q->second.rate : model_rate;
      if (rate >= 0) weight[i] = rate * dt;
    }
    if (weight[i] >= 0) {
      rate_sum += weight[i];
      ++rate_n;
    }
  }
  // Members with no history at all are assumed to work like the average member.
  const double fallback = rate_n > 0 ? rate_sum / rate_n : 1.0;
  double total = 0;
  for (auto& w : weight) {
    if (w < 0) w = fallback;
    total += w;
  }
  for (std::size_t i = 0; i < s.members.size(); ++i) {
    // Nobody did measurable work: everyone present held the replica equally.
    const double share = total > 0 ? s.usd * (weight[i] / total) : s.usd / static_cast<double>(s.members.size());
    const auto q = requests_.find(s.members[i].handle);
    if (q != requests_.end()) q->second.cost += share;
    sink_.on_share(s.members[i].handle, s.t0, s.t1, share);
  }
  stats_.pending_usd -= s.usd;
}

void Ledger::settle_complete(Replica& r) {
  std::deque<Segment> keep;
  for (auto& s : r.pending) {
    if (s.unknown == 0) settle(s, r.model);
    else keep.push_back(std::move(s));
  }
  r.pending.swap(keep);
}

void Ledger::enforce_cap(Replica& r) {
  if (r.pending.size() <= kMaxPending) return;
  // Settle the oldest half at once so the cost of estimating is paid rarely.
  while (r.pending.size() > kMaxPending / 2) {
    settle(r.pending.front(), r.model);
    r.pending.pop_front();
    ++stats_.capped_settlements;
  }
}

ReplicaState Ledger::set_state(const std::string& id, const std::string& model, const std::string& cls,
                               const StateRates& rates, ReplicaState state, double t) {
  auto it = replicas_.find(id);
  if (it == replicas_.end()) {
    if (state == ReplicaState::kStopped) return ReplicaState::kStopped;
    Replica r;
    r.model = model;
    r.cls = cls;
    r.rates = rates;
    r.state = state;
    r.t_last = t;
    replicas_.emplace(id, std::move(r));
    return ReplicaState::kStopped;
  }
  Replica& r = it->second;
  close(r, t);
  const auto previous = r.state;
  r.state = state;
  r.rates = rates;
  enforce_cap(r);
  if (state == ReplicaState::kStopped && r.in_flight.empty() && r.pending.empty()) replicas_.erase(it);
  return previous;
}

bool Ledger::start(std::uint64_t handle, const std::string& replica_id, double t) {
  const auto it = replicas_.find(replica_id);
  if (it == replicas_.end()) return false;
  Replica& r = it->second;
  t = close(r, t);
  enforce_cap(r);
  r.in_flight.push_back(handle);
  Request q;
  q.replica_id = replica_id;
  q.t_start = q.last_t = t;
  requests_.emplace(handle, std::move(q));
  return true;
}

void Ledger::spread_reported(Request& q, std::uint64_t handle, Replica& r, double t) {
  const double span = t - q.last_t;
  if (span <= 0) return;  // same instant: the work is spread by the next report or the finish
  const double delta = q.reported - q.last_work;
  // Only segments after the previous report can still wait for this request: walk back to it.
  for (auto it = r.pending.rbegin(); it != r.pending.rend() && it->t1 > q.last_t; ++it)
    for (auto& m : it->members)
      if (m.handle == handle && m.work < 0) {
        m.work = delta * ((it->t1 - it->t0) / span);
        --it->unknown;
      }
  q.rate = delta / span;
  q.last_t = t;
  q.last_work = q.reported;
}

void Ledger::progress(std::uint64_t handle, double cumulative_work, double t) {
  const auto qi = requests_.find(handle);
  if (qi == requests_.end()) return;
  Request& q = qi->second;
  Replica& r = replicas_.at(q.replica_id);  // a replica outlives its in-flight requests
  t = close(r, t);
  if (cumulative_work < q.reported) ++stats_.progress_regressions;
  q.reported = std::max(q.reported, cumulative_work);
  spread_reported(q, handle, r, t);
  if (!r.pending.empty() && r.pending.front().unknown == 0) settle_complete(r);
  enforce_cap(r);
}

double Ledger::finish(std::uint64_t handle, double t) {
  const auto qi = requests_.find(handle);
  if (qi == requests_.end()) return 0;
  Request& q = qi->second;
  const auto ri = replicas_.find(q.replica_id);
  Replica& r = ri->second;
  t = close(r, t);
  spread_reported(q, handle, r, t);
  std::deque<Segment> keep;
  for (auto& s : r.pending) {
    bool mine = false;
    for (auto& m : s.members)
      if (m.handle == handle) {
        mine = true;
        if (m.work < 0) m.work = 0;  // its reports are final now
      }
    if (mine) settle(s, r.model);
    else keep.push_back(std::move(s));
  }
  r.pending.swap(keep);
  r.in_flight.erase(std::remove(r.in_flight.begin(), r.in_flight.end(), handle), r.in_flight.end());
  const double duration = t - q.t_start;
  if (duration > 0 && q.reported > 0) {
    auto& mr = model_rates_[r.model];
    const double rate = q.reported / duration;
    mr.work_per_s = mr.work_per_s < 0 ? rate : mr.work_per_s + kModelRateAlpha * (rate - mr.work_per_s);
  }
  const double cost = q.cost;
  requests_.erase(qi);
  if (r.state == ReplicaState::kStopped && r.in_flight.empty() && r.pending.empty()) replicas_.erase(ri);
  return cost;
}

void Ledger::advance(double t) {
  for (auto& [id, r] : replicas_) {
    close(r, t);
    enforce_cap(r);
  }
}

}  // namespace tidegate::cost
