#include "tidegate/cache/calibration.h"

#include <algorithm>
#include <boost/math/distributions/binomial.hpp>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "tidegate/cache/cache_config.h"

namespace tidegate::cache {

double clopper_pearson_upper(std::size_t errors, std::size_t n, double confidence) {
  if (errors >= n) return 1.0;  // includes n == 0: nothing observed bounds nothing
  using boost::math::binomial_distribution;
  // find_upper_bound_on_p(trials, successes, alpha) is the one-sided exact (Clopper-Pearson)
  // bound: the largest p under which seeing `errors` or fewer has probability >= alpha.
  return binomial_distribution<>::find_upper_bound_on_p(static_cast<double>(n), static_cast<double>(errors),
                                                         1.0 - confidence, binomial_distribution<>::clopper_pearson_exact_interval);
}

std::size_t min_rows_for(double max_false_hit_rate, double confidence) {
  // Zero errors in n: upper bound 1 - (1 - confidence)^(1/n) <= rate  <=>  n >= ln(1-c)/ln(1-rate).
  return static_cast<std::size_t>(std::ceil(std::log(1.0 - confidence) / std::log1p(-max_false_hit_rate)));
}

std::size_t first_test_rows(double max_false_hit_rate, double confidence) {
  std::size_t n = min_rows_for(max_false_hit_rate, confidence);
  while (clopper_pearson_upper(static_cast<std::size_t>(n * max_false_hit_rate / 2), n, confidence) > max_false_hit_rate) ++n;
  return n;
}

Calibration calibrate_threshold(std::vector<CalibrationRow> rows, double max_false_hit_rate, double confidence) {
  Calibration out;
  out.rows = rows.size();
  std::sort(rows.begin(), rows.end(), [](const CalibrationRow& a, const CalibrationRow& b) { return a.score > b.score; });
  // errors_upto[i]: wrong rows among the i highest scores.
  std::vector<std::size_t> errors_upto(rows.size() + 1, 0);
  for (std::size_t i = 0; i < rows.size(); ++i) errors_upto[i + 1] = errors_upto[i] + (rows[i].correct ? 0 : 1);
  // A threshold is a score; accepting "score >= t" takes every row tied at t, so a step of k rows
  // is widened to the end of its tie.
  auto widen = [&](std::size_t k) {
    while (k < rows.size() && k > 0 && rows[k].score == rows[k - 1].score) ++k;
    return k;
  };
  const std::size_t first = first_test_rows(max_false_hit_rate, confidence);
  if (rows.size() < first) {
    out.why = "calibration set too small: " + std::to_string(rows.size()) + " rows, the first test needs " + std::to_string(first);
    return out;
  }
  for (std::size_t k = widen(first);; k = widen(std::max(k + 1, static_cast<std::size_t>(std::ceil(k * 1.25))))) {
    k = std::min(k, rows.size());
    const double ub = clopper_pearson_upper(errors_upto[k], k, confidence);
    if (ub > max_false_hit_rate) {
      if (!out.ok)
        out.why = "no threshold meets the bound: the top " + std::to_string(k) + " rows hold " +
                  std::to_string(errors_upto[k]) + " false hits (upper bound " + std::to_string(ub) + ")";
      break;
    }
    out.ok = true;
    out.threshold = rows[k - 1].score;
    out.accepted = k;
    out.false_hits = errors_upto[k];
    out.upper_bound = ub;
    if (k == rows.size()) break;
  }
  return out;
}

namespace {

// The verifier's probability as the combination reads it: one clamp for the fit and the cache.
double clamped_logit(double probability) {
  const double p = std::clamp(probability, 1e-7, 1 - 1e-7);
  return std::log(p / (1 - p));
}

}  // namespace

double combined_score(const std::array<double, 3>& combine, double cosine, double probability) {
  const double z = combine[0] + combine[1] * cosine + combine[2] * clamped_logit(probability);
  return 1.0 / (1.0 + std::exp(-z));
}

std::optional<GuardChecks> parse_guard_checks(std::string_view list) {
  GuardChecks g{false, false, false, false};
  if (list == "none") return g;
  if (list.empty()) return std::nullopt;  // no check at all is said "none"
  while (!list.empty()) {
    const auto comma = list.find(',');
    const auto item = list.substr(0, comma);
    if (item == "numbers") g.numbers = true;
    else if (item == "names") g.names = true;
    else if (item == "negation") g.negation = true;
    else if (item == "order") g.order = true;
    else return std::nullopt;
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return g;
}

std::string to_string(const GuardChecks& g) {
  std::string out;
  for (auto [on, name] : {std::pair{g.numbers, "numbers"}, {g.names, "names"}, {g.negation, "negation"}, {g.order, "order"}})
    if (on) out += (out.empty() ? "" : ",") + std::string(name);
  return out.empty() ? "none" : out;
}

std::vector<CalibrationRow> read_calibration_rows(const std::string& path, std::array<double, 3>* combine,
                                                  GuardChecks* guards) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("calibration file " + path + " cannot be read");
  std::vector<CalibrationRow> rows;
  std::string line;
  for (std::size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#' || line.rfind("score", 0) == 0) continue;
    if (line.rfind("guards,", 0) == 0) {
      const auto g = parse_guard_checks(std::string_view(line).substr(7));
      if (!g)
        throw std::runtime_error("calibration file " + path + " line " + std::to_string(n) +
                                 ": expected guards,<numbers|names|negation|order, comma-separated, or none>");
      if (guards) *guards = *g;
      continue;
    }
    if (line.rfind("combine,", 0) == 0) {
      std::array<double, 3> c{};
      std::size_t pos = 8;
      bool ok = true;
      for (std::size_t k = 0; k < 3 && ok; ++k) {
        const auto end = k < 2 ? line.find(',', pos) : line.size();
        try {
          std::size_t used = 0;
          const auto field = line.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
          c[k] = std::stod(field, &used);
          ok = used == field.size() && std::isfinite(c[k]);
        } catch (const std::exception&) {
          ok = false;
        }
        if (end == std::string::npos) ok = ok && k == 2;
        pos = end == std::string::npos ? line.size() : end + 1;
      }
      if (!ok) throw std::runtime_error("calibration file " + path + " line " + std::to_string(n) + ": expected combine,a,b,c");
      if (combine) *combine = c;
      continue;
    }
    const auto comma = line.find(',');
    CalibrationRow r;
    std::size_t used = 0;
    bool ok = comma != std::string::npos;
    if (ok) {
      try {
        r.score = std::stod(line.substr(0, comma), &used);
      } catch (const std::exception&) {
        ok = false;
      }
      const auto label = line.substr(comma + 1);
      ok = ok && used == comma && std::isfinite(r.score) && (label == "0" || label == "1");
      r.correct = label == "1";
    }
    if (!ok) throw std::runtime_error("calibration file " + path + " line " + std::to_string(n) + ": expected score,0|1");
    rows.push_back(r);
  }
  if (rows.empty()) throw std::runtime_error("calibration file " + path + " holds no rows");
  return rows;
}

std::array<double, 3> fit_combiner(const std::vector<CombinerSample>& samples) {
  std::array<double, 3> w = {0, 0, 1};
  if (samples.size() < 10) return w;
  std::vector<std::array<double, 3>> x;
  std::vector<double> y;
  x.reserve(samples.size());
  y.reserve(samples.size());
  for (const auto& s : samples) {
    x.push_back({1.0, s.cosine, clamped_logit(s.probability)});
    y.push_back(s.right ? 1.0 : 0.0);
  }
  constexpr double kRidge = 1e-3;
  // Penalised negative log-likelihood; log(1 + e^z) written so that it neither overflows nor
  // loses the small values.
  auto loss = [&](const std::array<double, 3>& v) {
    double l = kRidge / 2 * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    for (std::size_t r = 0; r < x.size(); ++r) {
      const double z = v[0] * x[r][0] + v[1] * x[r][1] + v[2] * x[r][2];
      l += (z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z))) - y[r] * z;
    }
    return l;
  };
  auto det3 = [](const double m[3][3]) {
    return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
           m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
  };
  double current = loss(w);
  for (int iter = 0; iter < 100; ++iter) {
    double g[3] = {kRidge * w[0], kRidge * w[1], kRidge * w[2]};
    double hm[3][3] = {{kRidge, 0, 0}, {0, kRidge, 0}, {0, 0, kRidge}};
    for (std::size_t r = 0; r < x.size(); ++r) {
      const double z = w[0] * x[r][0] + w[1] * x[r][1] + w[2] * x[r][2];
      const double p = 1.0 / (1.0 + std::exp(-z));
      for (int a = 0; a < 3; ++a) {
        g[a] += (p - y[r]) * x[r][a];
        for (int b = 0; b < 3; ++b) hm[a][b] += p * (1 - p) * x[r][a] * x[r][b];
      }
    }
    const double det = det3(hm);
    if (!(std::abs(det) > 1e-12)) break;
    double d[3];  // the Newton step: hm d = g (3x3, Cramer's rule)
    for (int c = 0; c < 3; ++c) {
      double m[3][3];
      for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 3; ++b) m[a][b] = b == c ? g[a] : hm[a][b];
      d[c] = det3(m) / det;
    }
    const double slope = g[0] * d[0] + g[1] * d[1] + g[2] * d[2];  // > 0: hm is positive definite
    double t = 1;
    std::array<double, 3> next = w;
    double next_loss = current;
    for (; t > 1e-10; t /= 2) {  // Armijo: take the step only as far as it lowers the loss enough
      next = {w[0] - t * d[0], w[1] - t * d[1], w[2] - t * d[2]};
      next_loss = loss(next);
      if (next_loss <= current - 1e-4 * t * slope) break;
    }
    if (!(t > 1e-10)) break;  // no step lowers the loss: at the optimum, to rounding
    const double step = t * std::max({std::abs(d[0]), std::abs(d[1]), std::abs(d[2])});
    w = next;
    current = next_loss;
    if (step < 1e-9) break;
  }
  return w;
}

}  // namespace tidegate::cache
