#pragma once
// The scaling policy: a pure function of signals and time. No sockets, clocks or threads,
// so the live scaler and the trace-replay tool (virtual time) run the very same code.
//
// Target tracking over two windows (Knative KPA style): a stable window (60 s) and a panic
// window (6 s). When panic-window demand reaches `panic_threshold` x capacity the policy
// scales up at once and does not scale down until a full stable window passes without
// panic. Scale-down is stabilised (HPA style): the highest recommendation of the last
// `scale_down_stabilization_s` wins. Replicas still starting count as capacity on the way.
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tidegate::scaler {

// Targets per signal; a signal without a target is ignored.
struct SignalTargets {
  std::optional<double> concurrency_per_replica = 16.0;  // requests in flight + queued, per replica
  std::optional<double> queue_per_replica;               // requests waiting, per replica
  std::optional<double> gpu_util;                        // mean over active replicas, fraction 0..1
  std::optional<double> kv_usage;                        // mean KV-cache usage, fraction 0..1
};

// A floor for known peaks. Times are seconds since midnight UTC; from > to wraps midnight.
struct ScheduledMinimum {
  unsigned days_mask = 0x7f;  // bit 0 = Sunday ... bit 6 = Saturday
  double from_s = 0;
  double to_s = 0;
  int min_replicas = 0;
};

struct PolicyConfig {
  int min_replicas = 1;
  int max_replicas = 8;
  bool scale_to_zero = false;  // required for min_replicas == 0
  SignalTargets targets;
  double stable_window_s = 60;
  double panic_window_s = 6;
  double panic_threshold = 2.0;  // panic-window demand / capacity
  double scale_down_stabilization_s = 300;
  double tolerance = 0.1;          // |value/target - 1| within this: no change for that signal
  double scale_up_max_rate = 10;   // desired <= max(max(capacity, 1) * rate, capacity + 1)
  int scale_up_max_step = 0;       // replicas per decision; 0 = unlimited
  double scale_down_max_rate = 2;  // desired >= floor(active / rate)
  int scale_down_max_step = 0;     // replicas per decision; 0 = unlimited
  std::vector<ScheduledMinimum> schedule;
};

// Observed demand for one model pool. nullopt = not available this tick (skipped).
struct Signals {
  std::optional<double> concurrency;  // total requests in flight + waiting
  std::optional<double> queue;        // total requests waiting
  std::optional<double> gpu_util;     // mean over active replicas, 0..1
  std::optional<double> kv_usage;     // mean over active replicas, 0..1
};

struct PolicyInput {
  double t = 0;                          // seconds on any clock; non-decreasing between calls
  std::optional<double> time_of_day_s;   // UTC seconds since midnight (for schedule)
  int weekday = -1;                      // 0 = Sunday; -1 = unknown (schedule then ignores days)
  Signals signals;
  int active = 0;    // routed replicas
  int starting = 0;  // replicas on the way (loading) that will add capacity
  int warm = 0;      // ready, not routed (informational)
};

enum class Direction { kUp, kDown, kHold };
constexpr std::string_view to_string(Direction d) {
  return d == Direction::kUp ? "up" : d == Direction::kDown ? "down" : "hold";
}

struct SignalRecommendation {
  std::string signal;  // "concurrency", "queue", "gpu_util", "kv_usage"
  double stable_value = 0;
  double panic_value = 0;
  double target = 0;
  int stable_desired = 0;
  int panic_desired = 0;
  bool within_tolerance = false;
};

// Bounded reason codes (used as a metric label); `reason` carries the numbers.
inline constexpr std::string_view kReasonCodes[] = {
    "target_tracking", "within_tolerance", "panic",         "from_zero",     "stabilised",
    "rate_limited",    "min_replicas",     "max_replicas",  "scheduled_min", "no_signals",
    "starting_covers",
};

struct Decision {
  double t = 0;
  int active = 0;
  int starting = 0;
  int desired = 0;  // desired active replicas
  Direction direction = Direction::kHold;
  bool panic = false;
  std::string reason_code;
  std::string reason;
  std::vector<SignalRecommendation> signals;
  Signals inputs;
};

// Carried between calls by the caller (one per model pool). Starts empty.
struct PolicyState {
  std::deque<std::pair<double, Signals>> samples;      // within the stable window
  std::deque<std::pair<double, int>> recommendations;  // within the stabilisation window
  bool panicking = false;
  double last_panic_t = 0;
  int panic_desired = 0;  // high-water mark while panicking
};

Decision decide(const PolicyConfig& config, PolicyState& state, const PolicyInput& input);

// Throws std::invalid_argument naming the field ("min_replicas", "stable_window", ...).
void validate(const PolicyConfig& config);

}  // namespace tidegate::scaler
