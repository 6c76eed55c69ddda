#include "tidegate/cache/calibration.h"

#include <gtest/gtest.h>

#include <boost/math/special_functions/beta.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <random>

using namespace tidegate::cache;

TEST(Calibration, ClopperPearsonMatchesItsClosedFormsAndTheBetaQuantile) {
  for (std::size_t n : {10u, 99u, 1000u}) {
    EXPECT_NEAR(clopper_pearson_upper(0, n, 0.95), 1 - std::pow(0.05, 1.0 / n), 1e-9) << n;
    for (std::size_t k : {1u, 3u, 9u}) {
      // The exact upper bound is the confidence quantile of Beta(k + 1, n - k).
      EXPECT_NEAR(clopper_pearson_upper(k, n, 0.95), boost::math::ibeta_inv(k + 1.0, double(n - k), 0.95), 1e-9) << k << "/" << n;
      EXPECT_GT(clopper_pearson_upper(k, n, 0.95), clopper_pearson_upper(k - 1, n, 0.95));
      EXPECT_GT(clopper_pearson_upper(k, n, 0.99), clopper_pearson_upper(k, n, 0.95));
      EXPECT_GT(clopper_pearson_upper(k, n, 0.95), double(k) / n);  // above the plain rate
    }
  }
  EXPECT_EQ(clopper_pearson_upper(5, 5, 0.95), 1.0);
  EXPECT_EQ(clopper_pearson_upper(0, 0, 0.95), 1.0);
}

TEST(Calibration, MinimumRowsIsWhereZeroErrorsFirstPass) {
  const auto n = min_rows_for(0.03, 0.95);
  EXPECT_EQ(n, 99u);
  EXPECT_LE(clopper_pearson_upper(0, n, 0.95), 0.03);
  EXPECT_GT(clopper_pearson_upper(0, n - 1, 0.95), 0.03);
}

TEST(Calibration, FirstTestLeavesRoomForHalfTheBudget) {
  for (double rate : {0.01, 0.03, 0.05, 0.1})
    for (double conf : {0.9, 0.95, 0.99}) {
      const auto n = first_test_rows(rate, conf);
      EXPECT_GE(n, min_rows_for(rate, conf));
      EXPECT_LE(clopper_pearson_upper(std::size_t(n * rate / 2), n, conf), rate);
      EXPECT_GT(clopper_pearson_upper(std::size_t((n - 1) * rate / 2), n - 1, conf), rate);
    }
}

TEST(Calibration, TooFewRowsOrTooManyErrorsSaySo) {
  std::vector<CalibrationRow> few(100, {0.9, true});
  auto c = calibrate_threshold(few, 0.03, 0.95);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.why.find("too small"), std::string::npos) << c.why;

  std::vector<CalibrationRow> bad;
  for (int i = 0; i < 2000; ++i) bad.push_back({1.0 - i * 1e-4, i % 5 != 0});  // 20% wrong at every score
  c = calibrate_threshold(bad, 0.03, 0.95);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.why.find("no threshold"), std::string::npos) << c.why;
}

TEST(Calibration, SeparatedScoresAcceptMostCorrectRowsAndNoWrongOne) {
  std::vector<CalibrationRow> rows;
  for (int i = 0; i < 1000; ++i) rows.push_back({0.6 + i * 1e-4, true});
  for (int i = 0; i < 1000; ++i) rows.push_back({0.1 + i * 1e-4, false});
  const auto c = calibrate_threshold(rows, 0.03, 0.95);
  ASSERT_TRUE(c.ok) << c.why;
  EXPECT_EQ(c.false_hits, 0u);
  // Steps grow by 25%, so the last one below the first wrong row holds at least 80% of the
  // correct rows (here 968 of 1000: the next step, 1210, takes in 210 wrong ones).
  EXPECT_GE(c.accepted, 800u);
  EXPECT_LE(c.accepted, 1000u);
  EXPECT_GE(c.threshold, 0.6);
}

TEST(Calibration, TiedScoresAreAcceptedOrRefusedTogether) {
  std::vector<CalibrationRow> rows;
  for (int i = 0; i < 600; ++i) rows.push_back({0.99, true});
  for (int i = 0; i < 600; ++i) rows.push_back({0.5, i % 2 == 0});
  const auto c = calibrate_threshold(rows, 0.03, 0.95);
  ASSERT_TRUE(c.ok) << c.why;
  EXPECT_EQ(c.threshold, 0.99);
  EXPECT_EQ(c.accepted, 600u);  // never a part of the 0.5 tie
}

// The property the issue asks for: over many calibration sets drawn from one population, the
// threshold chosen has a true false-hit rate above the bound in at most (1 - confidence) of them.
// Population: score s uniform on [0.5, 1], P(correct | s) = s, so among s >= t the true false-hit
// rate is (1 - t) / 2 (the bound 0.05 is met exactly at t = 0.9).
TEST(Calibration, BoundHoldsWithTheStatedConfidenceAndUsesTheBudget) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  const double alpha = 0.05, confidence = 0.9;
  const int trials = 400;
  int violations = 0, failed = 0;
  std::vector<double> rates;
  for (int t = 0; t < trials; ++t) {
    std::vector<CalibrationRow> rows(3000);
    for (auto& r : rows) {
      r.score = 0.5 + 0.5 * u(rng);
      r.correct = u(rng) < r.score;
    }
    const auto c = calibrate_threshold(rows, alpha, confidence);
    if (!c.ok) {
      ++failed;
      continue;
    }
    const double true_rate = (1 - c.threshold) / 2;
    rates.push_back(true_rate);
    if (true_rate > alpha) ++violations;
  }
  // The first test (top ~first_test_rows) fails only by bad luck at the top of the scores.
  EXPECT_LT(failed, trials / 10) << failed;
  // Binomial(400, 0.1): mean 40, sd 6; allow three sd.
  EXPECT_LE(violations, 58) << violations << " of " << trials;
  std::sort(rates.begin(), rates.end());
  EXPECT_GT(rates[rates.size() / 2], 0.5 * alpha) << "the bound is met by refusing nearly everything";
}

namespace {

double sigmoid(double z) { return 1 / (1 + std::exp(-z)); }
double logit(double p) { return std::log(p / (1 - p)); }

double penalised_loss(const std::vector<CombinerSample>& s, const std::array<double, 3>& w) {
  double l = 0;
  for (const auto& x : s) {
    const double p = std::clamp(x.probability, 1e-7, 1 - 1e-7);
    const double q = std::clamp(sigmoid(w[0] + w[1] * x.cosine + w[2] * logit(p)), 1e-300, 1 - 1e-16);
    l -= x.right ? std::log(q) : std::log1p(-q);
  }
  return l;
}

}  // namespace

TEST(CombinerFit, RecoversTheCoefficientsItsSamplesWereDrawnFrom) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> cos(0.8, 1.0), lp(-4, 4), u(0, 1);
  const std::array<double, 3> truth = {-6.0, 8.0, 0.4};
  std::vector<CombinerSample> s;
  for (int i = 0; i < 40000; ++i) {
    const double c = cos(rng), p = sigmoid(lp(rng));
    s.push_back({c, p, u(rng) < sigmoid(truth[0] + truth[1] * c + truth[2] * logit(p))});
  }
  const auto w = fit_combiner(s);
  EXPECT_NEAR(w[0], truth[0], 1.0);
  EXPECT_NEAR(w[1], truth[1], 1.2);
  EXPECT_NEAR(w[2], truth[2], 0.05);
}

// An over-confident verifier: most probabilities at the clamp (logits of +-16), agreeing with the
// labels except for a few. Plain Newton steps from {0, 0, 1} overshoot here and diverge (the
// evaluator once wrote a, b, c of 3e5, 3e5 and 1.7e6 into a calibration).
TEST(CombinerFit, SaturatedProbabilitiesGiveAFiniteFitNoWorseThanTheProbabilityAlone) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> cos(0.8, 1.0), u(0, 1);
  std::vector<CombinerSample> s;
  for (int i = 0; i < 4000; ++i) {
    const bool right = u(rng) < 0.35;
    const bool flipped = u(rng) < 0.03;  // the verifier is sure, and wrong
    const double p = (right != flipped) ? 1 - 1e-9 : 1e-9;
    s.push_back({cos(rng), p, right});
  }
  const auto w = fit_combiner(s);
  for (double v : w) {
    EXPECT_TRUE(std::isfinite(v));
    EXPECT_LT(std::abs(v), 100.0) << w[0] << " " << w[1] << " " << w[2];
  }
  EXPECT_LE(penalised_loss(s, w), penalised_loss(s, {0, 0, 1}));
  // And it ranks the samples the verifier calls right above those it calls wrong.
  EXPECT_GT(w[2], 0);
}

TEST(CombinerFit, TooFewSamplesKeepTheProbabilityAlone) {
  const std::vector<CombinerSample> s(9, CombinerSample{0.9, 0.7, true});
  EXPECT_EQ(fit_combiner(s), (std::array<double, 3>{0, 0, 1}));
}
