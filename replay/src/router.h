#pragma once
// Which replica a dispatched request goes to: the run's balancer over the replicas that may take
// it (active, with a free slot). The replay's loop and the offline optimum's schedule search both
// dispatch through it, so the optimum is searched with the routing its schedules are replayed
// with. Copyable: forking a fleet forks its router (seeded generator, round-robin turn).
#include <cstdint>
#include <random>
#include <vector>

#include "tidegate/replay/replay.h"
#include "tidegate/replay/trace.h"
#include "tidegate/routing/prefix_aware.h"
#include "tidegate/routing/prefix_index.h"

namespace tidegate::replay::detail {

// One replica that may take the request.
struct Eligible {
  int in_flight = 0;
  const routing::PrefixIndex* routed_prefixes = nullptr;
};

class Router final {
 public:
  explicit Router(const ReplayOptions& options) : balancer_(options.balancer), prefix_aware_(options.prefix_aware) {}

  // Index into `eligible` (not empty). least_outstanding and ideal: the first with the fewest in
  // flight; round_robin: in turn; prefix_aware: routing::choose_prefix_aware, the gateway's code.
  std::size_t pick(const std::vector<Eligible>& eligible, const TraceRequest& req);

  std::size_t prefix_routed() const { return prefix_routed_; }  // picks made for a prefix match
  std::int64_t prefix_expected_blocks() const { return prefix_expected_blocks_; }

 private:
  Balancer balancer_;
  routing::PrefixAwareConfig prefix_aware_;
  std::vector<routing::Candidate> candidates_;
  std::size_t round_robin_ = 0;
  std::mt19937_64 rng_{0x7469646567617465ULL};
  std::size_t prefix_routed_ = 0;
  std::int64_t prefix_expected_blocks_ = 0;
};

}  // namespace tidegate::replay::detail
