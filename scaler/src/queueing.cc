#include "queueing.h"

#include <algorithm>
#include <cmath>

namespace tidegate::scaler::queueing {
namespace {

// P(Exp(1) + Exp(mu) > s): the hypoexponential tail.
double sum_tail(double mu, double s) {
  if (std::abs(mu - 1.0) < 1e-9) return (1 + s) * std::exp(-s);
  return (mu * std::exp(-s) - std::exp(-mu * s)) / (mu - 1.0);
}

double misses_from(double b, int c, double a, double s, double cv2) {
  const double cd = static_cast<double>(c);
  const double wait = cd * b / (cd - a * (1 - b));  // Erlang C from Erlang B
  const double rate = (cd - a) * 2 / (1 + std::max(0.0, cv2));
  return std::clamp(wait, 0.0, 1.0) * (sum_tail(rate, s) - std::exp(-s));
}

}  // namespace

double erlang_c(int c, double a) {
  if (a <= 0) return 0;
  if (c <= a) return 1;
  double b = 1;  // Erlang B by its stable recursion
  for (int k = 1; k <= c; ++k) b = a * b / (k + a * b);
  return std::clamp(c * b / (c - a * (1 - b)), 0.0, 1.0);
}

double queueing_misses(int c, double a, double s, double cv2) {
  if (a <= 0) return 0;
  if (c <= a) return 1;
  double b = 1;
  for (int k = 1; k <= c; ++k) b = a * b / (k + a * b);
  return misses_from(b, c, a, s, cv2);
}

int servers_for(double a, double s, double eps, int max_c, double cv2) {
  if (!(a > 0)) return 0;
  const int start = std::max(1, static_cast<int>(std::floor(a)) + 1);
  if (start >= max_c) return max_c;
  double b = 1;
  for (int k = 1; k <= start; ++k) b = a * b / (k + a * b);
  for (int c = start;; ++c) {
    if (c >= max_c || misses_from(b, c, a, s, cv2) <= eps) return std::min(c, max_c);
    b = a * b / (c + 1 + a * b);
  }
}

int servers_within(double a, double s, double eps, double arrivals, double spare, int max_c, double cv2) {
  const double share = arrivals > 0 ? spare / arrivals : 0.0;  // nothing to pace: the eps share
  return servers_for(a, s, std::clamp(share, eps, 1.0), max_c, cv2);
}

}  // namespace tidegate::scaler::queueing
