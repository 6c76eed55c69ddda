#include "quiet_gap.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <boost/math/distributions/students_t.hpp>

#include "burst_hold.h"
#include "demand.h"
#include "target_tracking.h"

namespace tidegate::scaler::detail {
namespace {

// Five intervals at least (an hour of bursts every ten minutes): fewer measure their spread too
// coarsely for a bound on the next, however Student's t widens it.
constexpr int kMinGaps = 5;

}  // namespace

double student_t_upper(double tail, double dof) {
  if (!(tail < 0.5)) return 0;
  if (!(tail > 1e-12) || !(dof > 0)) return INFINITY;  // Boost's policy would throw past that
  return boost::math::quantile(boost::math::complement(boost::math::students_t(dof), tail));
}

namespace {

struct Spread {
  double mean = 0, sd = 0, least = 0;
};
Spread spread(const std::vector<double>& v) {
  Spread out;
  for (double x : v) out.mean += x;
  out.mean /= static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - out.mean) * (x - out.mean);
  out.sd = std::sqrt(var / static_cast<double>(v.size() - 1));
  out.least = *std::min_element(v.begin(), v.end());
  return out;
}

}  // namespace

QuietGap quiet_gap(const PolicyState& st, double spare, double window_s, double cold_start_s, double lag_s) {
  QuietGap out;
  const auto& spans = st.burst_spans;  // (start, fell below its level), oldest first
  const int n = static_cast<int>(spans.size()) - 1;
  out.gaps = std::max(0, n);
  if (n < kMinGaps) return out;
  // Timed from the moment a burst's load fell below its level to the next one's start: a pause
  // after each burst. (Start to start was tried as the clock where its intervals spread less:
  // five intervals of a Markov-modulated process's merged bursts spread little by chance, a burst
  // came early and took a six-hour row from 99.78% to 98.96%; bench/RESULTS.md.)
  std::vector<double> gaps;
  for (int i = 0; i < n; ++i) gaps.push_back(spans[i + 1].first - spans[i].second);
  const Spread clock = spread(gaps);
  out.mean_gap = clock.mean;
  out.sd_gap = clock.sd;
  out.mean_cycle = (spans.back().first - spans.front().first) / n;  // the starts' intervals telescope
  // What an early burst may cost is paid from the window's unused budget: each of the window's
  // bursts (window / mean cycle of them) may come early with chance `risk` and then, at worst,
  // miss all its first tokens (as many as the most a remembered burst brought). An expectation,
  // as the step below a served fleet (burst_hold.cc) is priced.
  const auto bursts = remembered_bursts(st);
  const double per_window = window_s / std::max(kBucketS, out.mean_cycle);
  if (!(spare > 0) || !(bursts.most_first_tokens > 0)) return out;
  out.risk = std::min(0.5, spare / (per_window * bursts.most_first_tokens));
  // The next interval, as a draw from the same process as the n seen: a one-sided prediction
  // bound, Student's t for a spread known only from them (the intervals taken as normal; they are
  // bounded below by zero and mostly skewed the other way, so the normal's lower tail is the
  // longer). Never later than the shortest seen.
  const double t = student_t_upper(out.risk, n - 1);
  const double bound = std::min(clock.least, clock.mean - t * clock.sd * std::sqrt(1 + 1.0 / n));
  if (!(bound > 0)) return out;
  out.known = true;
  out.onset = spans.back().second + bound - lag_s;
  out.restore_t = out.onset - cold_start_s;
  return out;
}

GapStep quiet_gap_step(const PolicyConfig& cfg, PolicyState& st, const GapInputs& in) {
  GapStep out{.active = in.planned};
  if (!cfg.quiet_gaps && st.gap_released_from == 0) return out;
  // First tokens the window may still miss: its budget less the misses at their upper bound.
  const double spare =
      std::max(0.0, unused_budget(in.window, 1 - cfg.slo.attainment, cfg.noise_z) * in.window.total);
  const auto gap = quiet_gap(st, spare, cfg.slo.window_s, in.cold_start_s, cfg.demand_short_window_s + kBucketS);
  const bool quiet = cfg.quiet_gaps && gap.known && in.between_bursts && in.vouched && !in.climbing &&
                     in.t < gap.restore_t && (st.gap_released_from > 0 || in.t + in.cold_start_s <= gap.restore_t);
  if (quiet && in.planned > in.base) {
    if (st.gap_released_from == 0) st.gap_released_from = std::max(in.planned, in.held_now);
    out = {in.base, true,
           "; quiet gap: " + std::to_string(gap.gaps) + " gaps between bursts (mean " + fmt("%.0f", gap.mean_gap) + "s, sd " + fmt("%.0f", gap.sd_gap) + "s) put the next no sooner than " +
               fmt("%.0f", gap.onset - in.t) +
               "s from now (" + fmt("%.2f", gap.risk * 100) + "% that it comes earlier, within the " +
               fmt("%.0f", spare) + " first tokens to spare): " + std::to_string(in.planned) + " released to " +
               std::to_string(in.base) + ", started again in " + fmt("%.0f", gap.restore_t - in.t) + "s"};
  } else if (st.gap_released_from > 0) {
    // Back to what would have been held for the next burst without the release.
    const auto hold = burst_hold(cfg, st, in.t, std::max(in.held_now, st.gap_released_from), in.window);
    if (hold.replicas > in.planned) out = {hold.replicas, false, "; the quiet gap ends: started again" + hold.why};
    if (in.held_now >= out.active) st.gap_released_from = 0;
  }
  return out;
}

}  // namespace tidegate::scaler::detail
