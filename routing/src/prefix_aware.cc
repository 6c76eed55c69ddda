#include "tidegate/routing/prefix_aware.h"

#include <algorithm>
#include <cmath>

namespace tidegate::routing {

std::size_t PrefixIndex::match(std::span<const std::uint64_t> blocks) const {
  // Held blocks of a chain form a prefix (see the class comment): binary search its end.
  std::size_t lo = 0, hi = blocks.size();  // blocks [0, lo) held; [hi, n) not
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (where_.count(blocks[mid])) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

void PrefixIndex::insert(std::span<const std::uint64_t> blocks) {
  if (capacity_ == 0) return;
  // Last block first, so the first block ends up the most recent: eviction then takes a
  // chain from its end.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    const auto found = where_.find(*it);
    if (found != where_.end()) {
      lru_.splice(lru_.begin(), lru_, found->second);
    } else {
      lru_.push_front(*it);
      where_.emplace(*it, lru_.begin());
    }
  }
  while (where_.size() > capacity_) {
    where_.erase(lru_.back());
    lru_.pop_back();
  }
}

void PrefixIndex::clear() {
  lru_.clear();
  where_.clear();
}

std::size_t PrefixIndex::capacity_for(double kv_tokens, int block_tokens) {
  if (!(kv_tokens > 0) || block_tokens < 1) return 0;
  return static_cast<std::size_t>(std::floor(kv_tokens / block_tokens));
}

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

Choice choose_prefix_aware(const PrefixAwareConfig& cfg, std::span<const Candidate> c, std::uint64_t random) {
  Choice out;
  if (c.empty()) return out;
  double total = 1, weights = 0;  // the fleet's load with this request, and its capacity
  for (const auto& x : c) total += std::max(0, x.outstanding), weights += x.weight > 0 ? x.weight : 0;
  auto within_bound = [&](const Candidate& x) {
    if (!(weights > 0)) return true;
    const double share = total * (x.weight > 0 ? x.weight : 0) / weights;
    return x.outstanding + 1 <= std::ceil(cfg.load_bound * share - 1e-9);
  };
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
