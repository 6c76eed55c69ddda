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
#include "tidegate/sim/timing_model.h"

namespace tidegate::replay::detail {

// One replica that may take the request.
struct Eligible {
  int in_flight = 0;
  const routing::PrefixIndex* routed_prefixes = nullptr;
};

// Blocks of the index the router keeps per replica: its whole KV cache under prefix_aware on a
// trace with block ids (`block_tokens` > 0; the most an engine can keep), else none (no other
// balancer reads it, and a fork copies every replica's).
std::size_t router_index_blocks(const ReplayOptions& options, const sim::TimingParams& engine, std::int32_t block_tokens);

class Router final {
 public:
  // `block_tokens`: the trace's KV block size (0: it carries no block ids).
  Router(const ReplayOptions& options, std::int32_t block_tokens)
      : balancer_(options.balancer), prefix_aware_(options.prefix_aware), ideal_cache_(block_tokens) {}

  // Index into `eligible` (not empty). least_outstanding and ideal: the first with the fewest in
  // flight; round_robin: in turn; prefix_aware: routing::choose_prefix_aware, the gateway's code.
  std::size_t pick(const std::vector<Eligible>& eligible, const TraceRequest& req);

  // Sends `req` (trace index `id`) to the picked replica's engine at t (already advanced to t) and
  // notes its blocks in that replica's index; under ideal, as one infinite cache would hold it.
  void submit(sim::TimingModel& engine, routing::PrefixIndex& routed_prefixes, std::size_t id, const TraceRequest& req,
              double t);

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
  InfinitePrefixCache ideal_cache_;  // ideal: every block dispatched so far
};

}  // namespace tidegate::replay::detail
