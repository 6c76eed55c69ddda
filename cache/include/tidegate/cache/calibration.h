#pragma once
// Calibrated decision for the semantic cache (issue 19): the user states the false-hit rate they
// accept (`max_false_hit_rate`), and the threshold on a score (the pair verifier's probability,
// or cosine) comes from a labelled calibration set with a one-sided confidence bound, so that
// the bound holds with the stated confidence, not only on average.
//
// The method: candidate thresholds are tested from the strictest down (fixed-sequence testing:
// each test at the full level 1 - confidence, stopping at the first that fails, which keeps the
// family-wise error at that level without a Bonferroni split). A threshold passes when the
// Clopper-Pearson upper bound on the false-hit rate among the rows it accepts is at most the
// rate asked for. The steps: the first at the smallest set on which half the rate asked for,
// observed, still passes (first_test_rows: a smaller first set passes only if near perfect, and
// a failure there ends the sequence with nothing), then each accepting 25% more rows. Pure functions: shared by the evaluator that writes the
// calibration and by the cache that reads it.
#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace tidegate::cache {

struct CalibrationRow {
  double score = 0;      // higher means "the cached answer answers it"
  bool correct = false;  // the label: would serving this hit have been right
};

struct Calibration final {
  bool ok = false;          // false: no threshold meets the bound on this set (why says so)
  double threshold = 1.0;   // accept score >= threshold
  std::size_t accepted = 0;     // calibration rows at or above it
  std::size_t false_hits = 0;   // of those, wrong
  double upper_bound = 1.0;     // Clopper-Pearson upper bound on the false-hit rate there
  std::size_t rows = 0;
  std::string why;
};

// One-sided Clopper-Pearson upper bound on a rate from `errors` of `n` (n > 0), at `confidence`.
double clopper_pearson_upper(std::size_t errors, std::size_t n, double confidence);

// The smallest number of accepted rows for which zero errors meet the bound.
std::size_t min_rows_for(double max_false_hit_rate, double confidence);

// The first test's size: the smallest n where floor(n * rate / 2) errors still meet the bound.
std::size_t first_test_rows(double max_false_hit_rate, double confidence);

Calibration calibrate_threshold(std::vector<CalibrationRow> rows, double max_false_hit_rate, double confidence);

// One labelled candidate for fitting the decision score (combined_score): its cosine, the
// verifier's probability, and whether serving it would have been right.
struct CombinerSample {
  double cosine = 0;
  double probability = 0;
  bool right = false;
};

// {a, b, c} of combined_score: logistic regression of `right` on (1, cosine, logit p) with a
// small ridge, by Newton's method with a backtracking line search. Plain Newton steps overshoot
// when the probabilities are extreme (an over-confident verifier: logits of +-16) or the labels
// nearly separable, and then diverge to coefficients of 1e5 and more; the line search makes
// every step lower the penalised loss, so the fit converges or stops where it is. Fewer than 10
// samples: {0, 0, 1}, the probability alone.
std::array<double, 3> fit_combiner(const std::vector<CombinerSample>& samples);

}  // namespace tidegate::cache
