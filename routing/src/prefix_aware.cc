#include "tidegate/routing/prefix_aware.h"

#include <algorithm>
#include <cmath>

namespace tidegate::routing {

namespace {

double load_of(const Candidate& c) { return c.outstanding / (c.weight > 0 ? c.weight : 1e-9); }

// splitmix64: two independent picks from one random number.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

int least_loaded_of_two(std::span<const Candidate> c, std::uint64_t random) {
  if (c.empty()) return -1;
  if (c.size() == 1) return 0;
  const auto a = static_cast<std::size_t>(mix(random) % c.size());
  auto b = static_cast<std::size_t>(mix(random ^ 0x5bd1e995ULL) % (c.size() - 1));
  if (b >= a) ++b;
  return static_cast<int>(load_of(c[b]) < load_of(c[a]) ? b : a);
}

namespace {
double weight_sum(std::span<const Candidate> c) {
  double w = 0;
  for (const auto& x : c) w += x.weight > 0 ? x.weight : 0;
  return w;
}
double load_sum(std::span<const Candidate> c) {
  double total = 1;  // with the request being placed
  for (const auto& x : c) total += std::max(0, x.outstanding);
  return total;
}
bool fits(const PrefixAwareConfig& cfg, const Candidate& x, double total, double weights) {
  if (!(weights > 0)) return true;
  const double share = total * (x.weight > 0 ? x.weight : 0) / weights;
  return x.outstanding + 1 <= std::max(static_cast<double>(cfg.min_bound), std::ceil(cfg.load_bound * share - 1e-9));
}
}  // namespace

bool within_load_bound(const PrefixAwareConfig& cfg, std::span<const Candidate> c, std::size_t i) {
  return i < c.size() && fits(cfg, c[i], load_sum(c), weight_sum(c));
}

std::uint64_t SessionTable::find(std::uint64_t session) {
  const auto it = where_.find(session);
  if (it == where_.end()) return 0;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void SessionTable::pin(std::uint64_t session, std::uint64_t replica) {
  if (capacity_ == 0) return;
  const auto it = where_.find(session);
  if (it != where_.end()) {
    it->second->second = replica;
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  lru_.emplace_front(session, replica);
  where_.emplace(session, lru_.begin());
  trim();
}

void SessionTable::forget_replica(std::uint64_t replica) {
  for (auto it = lru_.begin(); it != lru_.end();) {
    if (it->second == replica) {
      where_.erase(it->first);
      it = lru_.erase(it);
    } else {
      ++it;
    }
  }
}

void SessionTable::set_capacity(std::size_t capacity) {
  capacity_ = capacity;
  trim();
}

void SessionTable::trim() {
  while (where_.size() > capacity_) {
    where_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

Choice choose_prefix_aware(const PrefixAwareConfig& cfg, std::span<const Candidate> c, std::uint64_t random) {
  Choice out;
  if (c.empty()) return out;
  const double total = load_sum(c), weights = weight_sum(c);
  auto within_bound = [&](const Candidate& x) { return fits(cfg, x, total, weights); };
  std::size_t longest = 0;
  int best = -1;
  for (std::size_t i = 0; i < c.size(); ++i) {
    longest = std::max(longest, c[i].matched_blocks);
    if (!within_bound(c[i]) || c[i].matched_blocks < std::max<std::size_t>(1, cfg.min_match_blocks)) continue;
    if (best < 0 || c[i].matched_blocks > c[best].matched_blocks ||
        (c[i].matched_blocks == c[best].matched_blocks && load_of(c[i]) < load_of(c[best])))
      best = static_cast<int>(i);
  }
  if (best >= 0) {
    out.index = best;
    out.matched_blocks = c[best].matched_blocks;
    out.reason = c[best].matched_blocks < longest ? ChoiceReason::kBounded : ChoiceReason::kPrefix;
    return out;
  }
  // Least loaded of two among the replicas within their bound (there is one unless weights
  // are odd; then among all). No allocation: the k-th open replica is found by a scan.
  std::size_t open = 0;
  for (const auto& x : c) open += within_bound(x);
  if (open < 2) {
    out.index = open == 0 ? least_loaded_of_two(c, random) : -1;
    for (std::size_t i = 0; out.index < 0 && i < c.size(); ++i)
      if (within_bound(c[i])) out.index = static_cast<int>(i);
  } else {
    auto nth_open = [&](std::size_t k) {
      for (std::size_t i = 0; i < c.size(); ++i)
        if (within_bound(c[i]) && k-- == 0) return i;
      return c.size() - 1;
    };
    const auto ka = static_cast<std::size_t>(mix(random) % open);
    auto kb = static_cast<std::size_t>(mix(random ^ 0x5bd1e995ULL) % (open - 1));
    if (kb >= ka) ++kb;
    const auto a = nth_open(ka), b = nth_open(kb);
    out.index = static_cast<int>(load_of(c[b]) < load_of(c[a]) ? b : a);
  }
  out.matched_blocks = c[out.index].matched_blocks;
  out.reason = longest >= std::max<std::size_t>(1, cfg.min_match_blocks) ? ChoiceReason::kBounded
                                                                         : ChoiceReason::kLeastLoaded;
  return out;
}

}  // namespace tidegate::routing
