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

double combined_score(const std::array<double, 3>& combine, double cosine, double probability) {
  const double p = std::clamp(probability, 1e-7, 1 - 1e-7);
  const double z = combine[0] + combine[1] * cosine + combine[2] * std::log(p / (1 - p));
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

}  // namespace tidegate::cache
