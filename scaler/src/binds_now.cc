#include "binds_now.h"

#include <algorithm>

#include "target_tracking.h"

namespace tidegate::scaler::detail {
namespace {
constexpr double kMinAdmitted = 20;  // fewer requests admitted in the long window: no hold time yet
}  // namespace

BindsNow binds_now(const PolicyConfig& cfg, const Signals& s, const Window& wl, const LoadForBinds& load) {
  BindsNow out;
  const auto& cap = cfg.capacity;
  const double x = load.service_s;
  if (cap.kv_tokens && s.kv_used_tokens && *cap.kv_tokens > 0)
    out.kv = ceil_count(*s.kv_used_tokens / (*cap.kv_tokens * cap.kv_target));
  if (cap.max_in_flight && *cap.max_in_flight > 0 && s.in_flight) {
    // Requests hold a slot for their whole generation. The slots in use cannot show a demand
    // beyond the slots there are: a fleet short of slots has them all busy and a queue behind.
    // The demand is the arrival rate times the time a request holds a slot (Little's law, the
    // hold measured as slot-seconds per request admitted over the long window), and the
    // requests queued for a slot are drained within a cold start, as the prefill backlog is.
    double slots = *s.in_flight;
    if (wl.admitted >= kMinAdmitted && x > 0) {
      const double hold_s = wl.in_flight_s / wl.admitted;
      slots = std::max(slots, load.now / x * hold_s + s.queue.value_or(0) * hold_s / load.drain_s);
    }
    out.slots = ceil_count(slots / (*cap.max_in_flight * cap.in_flight_target));
  }
  const double p = load.prompt_tokens;
  if (s.prefill_backlog_tokens && p > 0 && load.tau_s > 0 && x > 0) {
    // Prompt tokens waiting, drained within drain_s on top of the load: sizing for the TTFT
    // budget instead would start dozens that come too late. With a standby tier the backlog is
    // what wakes it at once, rather than the demand windows a few seconds later.
    const double backlog_s = *s.prefill_backlog_tokens * (x / ((1 - load.hit_ratio) * p));
    out.backlog = ceil_count(load.planned + backlog_s / load.drain_s);
    out.backlog_less_noise = ceil_count(load.planned_less_noise + backlog_s / load.drain_s);
  }
  return out;
}

}  // namespace tidegate::scaler::detail
