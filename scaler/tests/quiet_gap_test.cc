// Bursts that keep time: the fleet held for the next burst is released in the gap and started
// again a cold start before the earliest the next burst is expected (quiet_gap.h), the chance
// that it comes earlier paid from the SLO window's unused budget. Bursts that do not keep time
// keep their fleet through the gaps, as before.
#include "quiet_gap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <random>
#include <vector>

#include "tidegate/scaler/policy.h"
#include "work_model_inputs.h"

namespace tidegate::scaler {
namespace {

using detail::quiet_gap;
using detail::student_t_upper;

TEST(QuietGap, StudentTUpperQuantilesMatchTheTables) {
  EXPECT_NEAR(student_t_upper(0.25, 1), 1.0, 1e-4);     // Cauchy: P(T > 1) = 1/4
  EXPECT_NEAR(student_t_upper(0.005, 9), 3.2498, 1e-3);
  EXPECT_NEAR(student_t_upper(0.01, 4), 3.7469, 1e-3);
  EXPECT_NEAR(student_t_upper(0.05, 20), 1.7247, 1e-3);
  EXPECT_NEAR(student_t_upper(0.05, 2), 2.9200, 1e-3);
  EXPECT_NEAR(student_t_upper(0.001, 30), 3.3852, 2e-3);
  EXPECT_NEAR(student_t_upper(0.025, 1000), 1.9623, 2e-3);  // towards the normal's 1.96
  EXPECT_EQ(student_t_upper(0.5, 5), 0);
  EXPECT_TRUE(std::isinf(student_t_upper(0, 5)));
}

// Bursts of 60 s after the given gaps, each with 4,800 first tokens.
PolicyState spans_after(const std::vector<double>& gaps) {
  PolicyState st;
  double t = 1000;
  for (double g : gaps) {
    st.burst_spans.push_back({t, t + 60});
    st.bursts.push_back({t + 120, 4800});
    t += 60 + g;
  }
  st.burst_spans.push_back({t, t + 60});
  st.bursts.push_back({t + 120, 4800});
  return st;
}

TEST(QuietGap, TimesTheNextBurstNoLaterThanTheShortestGapSeen) {
  const std::vector<double> gaps = {520, 610, 700, 560, 650, 590, 680, 540};
  const auto st = spans_after(gaps);
  const double fell = st.burst_spans.back().second;
  const auto g = quiet_gap(st, /*spare=*/300, /*window_s=*/3600, /*cold_start_s=*/60, /*lag_s=*/15);
  ASSERT_TRUE(g.known);
  EXPECT_EQ(g.gaps, 8);
  EXPECT_NEAR(g.mean_gap, 606.25, 1e-9);
  EXPECT_NEAR(g.mean_cycle, 666.25, 1e-9);
  // 300 to spare over 3600 / 666 bursts of 4,800 first tokens: about 1.2% a burst.
  EXPECT_NEAR(g.risk, 300 / (3600 / 666.25 * 4800), 1e-9);
  EXPECT_LE(g.onset, fell + 520 - 15);
  EXPECT_GT(g.onset, fell + 300);  // a bound, not a refusal
  EXPECT_DOUBLE_EQ(g.restore_t, g.onset - 60);
  // Less to spare: a smaller chance allowed, an earlier bound.
  const auto strict = quiet_gap(st, 30, 3600, 60, 15);
  ASSERT_TRUE(strict.known);
  EXPECT_LT(strict.onset, g.onset);
}

TEST(QuietGap, SaysNothingWithoutEnoughGapsBudgetOrRegularity) {
  EXPECT_FALSE(quiet_gap(spans_after({520, 610, 700, 560}), 300, 3600, 60, 15).known);  // four gaps
  EXPECT_TRUE(quiet_gap(spans_after({520, 610, 700, 560, 650}), 300, 3600, 60, 15).known);
  EXPECT_FALSE(quiet_gap(spans_after({520, 610, 700, 560, 650}), 0, 3600, 60, 15).known);  // nothing to spare
  // Gaps like a Poisson process's (exponential, mean 600 s): no time is safe.
  EXPECT_FALSE(quiet_gap(spans_after({40, 900, 310, 1500, 120, 650, 75, 980}), 300, 3600, 60, 15).known);
}

// A fleet under bursts of 80 req/s (8 replicas of prefill load) for 60 s, with `gap(k)` seconds
// of 2 req/s after burst k. A burst's first tokens are in time while 8 or more replicas serve it,
// half of them late with fewer. Replicas started arrive a cold start (60 s) later; released ones
// go at once. Starts on 10 replicas.
struct Run {
  std::vector<int> at_onset;     // replicas active at each burst's first second
  double replica_s_between = 0;  // replica-seconds between bursts, after the first hour
  std::vector<std::string> reasons;
};

Run run_bursts(const std::function<double(int)>& gap, double until, bool quiet_gaps = true) {
  auto cfg = work_inputs::work_config();
  cfg.hold_starting_fleet = true;
  cfg.quiet_gaps = quiet_gaps;
  PolicyState st;
  int active = 10;
  std::deque<double> starting;  // ready times
  std::vector<std::pair<double, double>> bursts;
  for (double t = 300; t < until;) {
    bursts.push_back({t, t + 60});
    t += 60 + gap(static_cast<int>(bursts.size()) - 1);
  }
  Run out;
  std::size_t next = 0;
  for (int t = 0; t < until; ++t) {
    while (!starting.empty() && starting.front() <= t) starting.pop_front(), ++active;
    while (next < bursts.size() && bursts[next].second <= t) ++next;
    const bool in_burst = next < bursts.size() && t >= bursts[next].first;
    if (in_burst && t == static_cast<int>(bursts[next].first)) out.at_onset.push_back(active);
    if (!in_burst && t >= 3600) out.replica_s_between += active + static_cast<double>(starting.size());
    PolicyInput in = work_inputs::tick(t, in_burst ? 80 : 2, 1000, active, in_burst && active < 8 ? 0.5 : 1.0);
    in.starting = static_cast<int>(starting.size());
    in.cold_start_s = 60;
    const auto d = decide(cfg, st, in);
    if (d.reason_code == "quiet_gap") out.reasons.push_back(d.reason);
    for (int n = active + in.starting; n < d.desired; ++n) starting.push_back(t + 60.0);
    if (d.desired < active) active = std::max(d.desired, 1);
  }
  return out;
}

// Gaps of 480-720 s, in an order that does not repeat within the run.
double timed_gap(int k) { return 480 + std::fmod(k * 157.0, 240.0); }

TEST(QuietGap, AFleetHeldForBurstsThatKeepTimeIsReleasedInTheGapAndBackBeforeTheNext) {
  const auto kept = run_bursts(timed_gap, 4 * 3600, /*quiet_gaps=*/false);
  const auto timed = run_bursts(timed_gap, 4 * 3600);
  ASSERT_GE(timed.at_onset.size(), 20u);
  ASSERT_FALSE(timed.reasons.empty()) << "never released";
  EXPECT_TRUE(kept.reasons.empty()) << kept.reasons.front();
  EXPECT_NE(timed.reasons.front().find("gaps between bursts"), std::string::npos) << timed.reasons.front();
  // Every burst meets the fleet it met without the release.
  ASSERT_EQ(timed.at_onset.size(), kept.at_onset.size());
  for (std::size_t k = 0; k < timed.at_onset.size(); ++k)
    EXPECT_GE(timed.at_onset[k], kept.at_onset[k]) << "burst " << k;
  // Between them it holds fewer replicas: out from a demand window after a burst (when it is
  // over) to a cold start before the bound, here about a fifth of the replica-seconds.
  EXPECT_LT(timed.replica_s_between, 0.85 * kept.replica_s_between)
      << timed.replica_s_between << " against " << kept.replica_s_between << "\n" << timed.reasons.front();
}

TEST(QuietGap, BurstsThatDoNotKeepTimeKeepTheirFleetThroughTheGaps) {
  // The same bursts, after gaps drawn as a Poisson process's (exponential, mean 600 s): the next
  // can come at any time. (The draws are the test's own, from mt19937_64, the same everywhere.)
  std::vector<double> gaps;
  std::mt19937_64 rng(7);
  for (int k = 0; k < 40; ++k) gaps.push_back(-600 * std::log(1 - static_cast<double>(rng() >> 11) * 0x1.0p-53));
  const auto untimed = run_bursts([&](int k) { return std::round(gaps[k]); }, 4 * 3600);
  ASSERT_GE(untimed.at_onset.size(), 15u);
  EXPECT_TRUE(untimed.reasons.empty()) << untimed.reasons.size() << " " << untimed.reasons.front();
}

TEST(QuietGap, ABurstThatComesEarlyStartsTheFleetAtOnce) {
  // Gaps of 480-720 s, then one of 200 s after burst 14: the burst comes long before the bound.
  // It meets the released fleet, which is started again in its first seconds (the history shows
  // the burst a few seconds in), and half its first tokens are late. The next burst meets the
  // held fleet again: what the early one was served with is not taken for what it needed.
  auto gap = [](int k) { return k == 14 ? 200.0 : timed_gap(k); };
  const auto kept = run_bursts(gap, 4 * 3600, false);
  const auto r = run_bursts(gap, 4 * 3600);
  ASSERT_GE(r.at_onset.size(), 20u);
  ASSERT_FALSE(r.reasons.empty());
  EXPECT_LT(r.at_onset[15], kept.at_onset[15]);
  EXPECT_GE(r.at_onset[16], kept.at_onset[16]);
}

}  // namespace
}  // namespace tidegate::scaler
