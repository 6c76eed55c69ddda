// Under bursty demand a fleet is released one burst at a time: a burst served within the TTFT
// SLO vouches for the fleet it met, so the next may meet one replica fewer, once the SLO window's
// unused budget covers the chance that the next burst is the largest yet; a step measured short
// in its burst goes back to the fleet that served, and stays there while bursts go on. A burst
// short beyond chance is kept as long, and forgotten a burst memory after the last burst.
#include <gtest/gtest.h>

#include <vector>

#include "tidegate/scaler/policy.h"
#include "work_model_inputs.h"

namespace tidegate::scaler {
namespace {

using work_inputs::frequent_burst_rate;
using work_inputs::in_frequent_burst;
using work_inputs::tick;

constexpr int kPeriod = 200;  // a burst every 200 s (work_model_inputs.h)

// The operator's `fleet` through `operated` seconds of bursts (fifteen by default, enough for a
// step's risk), every first token in time; then the policy's own decisions (a replica started
// is there the next second) through bursts whose first tokens meet the TTFT at `met(n, t)`, n the
// fewest replicas active in the burst so far. Returns those fewest, burst by burst from
// t = `operated` on.
template <class Met, class Rate = double (*)(int)>
std::vector<int> fleets_met_by_bursts(int fleet, int until, Met met, Decision* last = nullptr,
                                      Rate rate = frequent_burst_rate, int operated = 3000) {
  const auto cfg = work_inputs::frequent_bursts_config();
  PolicyState st;
  int active = fleet;
  std::vector<int> fewest;
  Decision d;
  for (int t = 0; t <= until; ++t) {
    const bool burst = in_frequent_burst(t);
    if (t >= operated && burst) {
      if (t % kPeriod == 0) fewest.push_back(active);
      fewest.back() = std::min(fewest.back(), active);
    }
    const double m = t >= operated && burst ? met(fewest.back(), t) : 1.0;
    d = decide(cfg, st, tick(t, rate(t), 1000, active, m));
    if (t >= operated) active = d.desired;
  }
  if (last) *last = d;
  return fewest;
}

std::string show(const std::vector<int>& v) {
  std::string s;
  for (int n : v) s += std::to_string(n) + " ";
  return s;
}

TEST(BurstByBurst, AFleetThatServesItsBurstsIsReleasedOneReplicaABurst) {
  // The 14 served fifteen bursts within the SLO, and the bursts' modelled load asks for 8. Each
  // burst from t = 3000 on meets at most one replica fewer than the one before, down to the 8.
  Decision last;
  const auto fleets = fleets_met_by_bursts(14, 5000, [](int, int) { return 1.0; }, &last);
  ASSERT_GE(fleets.size(), 8u);
  EXPECT_EQ(fleets.front(), 13) << show(fleets);
  for (std::size_t k = 1; k < fleets.size(); ++k) EXPECT_GE(fleets[k], fleets[k - 1] - 1) << show(fleets);
  EXPECT_LE(fleets.back(), 9) << show(fleets) << last.reason;  // the descent goes on, not stuck at 13
}

TEST(BurstByBurst, AStepIsTakenOnlyWhenTheBudgetCoversTheNextBurstBeingTheLargestYet) {
  // After seven bursts, with six in the burst memory, the next is the largest yet with chance
  // 1/7: a step risks a seventh of a burst's first tokens, more than the SLO window's 1% holds
  // unused. The 14 that served meet the next bursts too. As the window fills, its budget grows
  // past the risk and the fleet is released one replica a burst.
  Decision at_1460;
  const auto first = fleets_met_by_bursts(14, 1460, [](int, int) { return 1.0; }, &at_1460, frequent_burst_rate, 1400);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0], 14) << at_1460.reason;
  EXPECT_EQ(at_1460.desired, 14) << at_1460.reason;
  EXPECT_NE(at_1460.reason.find("one fewer would risk"), std::string::npos) << at_1460.reason;
  const auto later = fleets_met_by_bursts(14, 5000, [](int, int) { return 1.0; }, nullptr, frequent_burst_rate, 1400);
  ASSERT_GE(later.size(), 15u);
  EXPECT_EQ(later[1], 14) << show(later);
  EXPECT_LT(later.back(), 10) << show(later);
  // The same bursts, each missing the TTFT for 0.8% of its first tokens: they spend the budget
  // the step would risk, so none is taken.
  const auto spent = fleets_met_by_bursts(14, 5000, [](int, int) { return 0.992; }, nullptr, frequent_burst_rate, 1400);
  ASSERT_GE(spent.size(), 15u);
  for (int n : spent) EXPECT_EQ(n, 14) << show(spent);
}

TEST(BurstByBurst, AStepMeasuredShortGoesBackToTheFleetThatServed) {
  // 12 replicas miss the TTFT for 5% of a burst's requests (the budget is 1%): after the burst
  // that 12 met, the policy starts the 13th again, and every burst after it meets 13: a burst's
  // shortfall is kept while bursts go on.
  const auto fleets = fleets_met_by_bursts(14, 6000, [](int n, int) { return n <= 12 ? 0.95 : 1.0; });
  ASSERT_GE(fleets.size(), 6u);
  ASSERT_EQ(fleets[0], 13) << show(fleets);
  ASSERT_EQ(fleets[1], 12) << show(fleets);
  for (std::size_t k = 2; k < fleets.size(); ++k) EXPECT_EQ(fleets[k], 13) << show(fleets);
}

TEST(BurstByBurst, ABurstServedSaysNothingOfALargerOne) {
  // The operator's last burst (t = 2800-2830) comes at 120 req/s, the others at 80. Its 14
  // vouch for 13; the smaller bursts after it, served by 13, vouch for nothing while the burst
  // memory (1200 s) holds the larger one, so the next bursts meet 13 too. Once it is forgotten,
  // they do.
  auto rate = [](int t) { return t >= 2800 && t < 2830 ? 120.0 : frequent_burst_rate(t); };
  const auto fleets = fleets_met_by_bursts(14, 6000, [](int, int) { return 1.0; }, nullptr, rate);
  ASSERT_GE(fleets.size(), 12u);
  for (std::size_t k = 0; k < 6; ++k) EXPECT_GE(fleets[k], 13) << show(fleets);  // t = 3000-4000
  EXPECT_LT(fleets.back(), 13) << show(fleets);
  // The same bursts, all at 80 req/s: each served one vouches for one fewer.
  const auto even = fleets_met_by_bursts(14, 3400, [](int, int) { return 1.0; });
  EXPECT_EQ(even[1], 12) << show(even);
}

TEST(BurstByBurst, ALargeBurstsShortfallOutlastsTheMemoryOfItsLoadWhileBurstsGoOn) {
  // Bursts of one process differ in size. The one at t = 3400 comes at 120 req/s, the others at
  // 80, and the fleet it meets misses the TTFT for 5% of its requests. The burst memory (1200 s)
  // then forgets its load, and the smaller bursts after it, served, would vouch for steps below
  // the fleet it was short with: the next large one would meet fewer. While bursts go on, no
  // burst meets fewer than that fleet.
  auto rate = [](int t) { return t >= 3400 && t < 3430 ? 120.0 : frequent_burst_rate(t); };
  int short_with = 0;
  auto met = [&](int n, int t) {
    if (t < 3400 || t >= 3430) return 1.0;
    short_with = n;
    return 0.95;
  };
  const auto fleets = fleets_met_by_bursts(14, 9000, met, nullptr, rate);
  ASSERT_GE(fleets.size(), 20u);
  ASSERT_GT(short_with, 0);
  ASSERT_LT(short_with, 13) << show(fleets);  // the descent had reached it
  for (std::size_t k = 3; k < fleets.size(); ++k) EXPECT_GE(fleets[k], short_with) << show(fleets);
}

TEST(BurstByBurst, ABurstsShortfallIsForgottenABurstMemoryAfterTheLastBurst) {
  // 12 replicas were short in a burst before t = 3800. The bursts stop there for longer than the
  // burst memory (1200 s), and come back at t = 5400, larger for three bursts (120 req/s), then
  // as before, every first token now in time. The fleet grown for the larger ones is released
  // burst by burst past the 12: the old shortfall was forgotten with the bursts.
  auto rate = [](int t) {
    if (t >= 3800 && t < 5400) return 2.0;
    return t >= 5400 && t < 6000 && in_frequent_burst(t) ? 120.0 : frequent_burst_rate(t);
  };
  auto met = [](int n, int t) { return t < 3800 && n <= 12 ? 0.95 : 1.0; };
  Decision last;
  const auto fleets = fleets_met_by_bursts(14, 11000, met, &last, rate);
  ASSERT_GE(fleets.size(), 30u);
  EXPECT_EQ(fleets[3], 13) << show(fleets);  // the last burst before the pause, t = 3600
  EXPECT_LT(fleets.back(), 12) << show(fleets) << last.reason;
}

TEST(BurstByBurst, ABurstShortOfTheSloByLessThanChanceVouchesForNothing) {
  // 12 replicas miss the TTFT for 1.5% of a burst's requests: over a burst of about 2,400 first
  // tokens that is neither clearly within the 1% budget nor clearly over it. The policy does not
  // release the 12th on it.
  const auto fleets = fleets_met_by_bursts(14, 6000, [](int n, int) { return n <= 12 ? 0.985 : 1.0; });
  ASSERT_GE(fleets.size(), 5u);
  ASSERT_EQ(fleets[1], 12) << show(fleets);
  for (std::size_t k = 2; k < fleets.size(); ++k) EXPECT_GE(fleets[k], 12) << show(fleets);
}

}  // namespace
}  // namespace tidegate::scaler
