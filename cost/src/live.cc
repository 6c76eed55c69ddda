#include "live.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace tidegate::cost {

LiveSeries::LiveSeries(double step_s, int points) : step_(step_s), ring_(static_cast<std::size_t>(points)) {}

std::int64_t LiveSeries::index(double t) const { return static_cast<std::int64_t>(std::floor(t / step_)); }

LiveSeries::Slot& LiveSeries::slot(std::int64_t idx) {
  auto& s = ring_[static_cast<std::size_t>(((idx % static_cast<std::int64_t>(ring_.size())) + ring_.size()) % ring_.size())];
  if (s.idx != idx) {
    s = Slot{};
    s.idx = idx;
  }
  return s;
}

const LiveSeries::Slot* LiveSeries::find(std::int64_t idx) const {
  const auto& s = ring_[static_cast<std::size_t>(((idx % static_cast<std::int64_t>(ring_.size())) + ring_.size()) % ring_.size())];
  return s.idx == idx ? &s : nullptr;
}

void LiveSeries::add(double t0, double t1, const std::string& series, const std::string& line, double amount) {
  if (t1 <= t0) {
    slot(index(t0)).sums[series][line] += amount;
    return;
  }
  // Only the part inside the ring's reach matters; older time would be overwritten anyway.
  const double window = step_ * static_cast<double>(ring_.size());
  const double span = t1 - t0;
  const double start = std::max(t0, t1 - window);
  for (double a = start; a < t1;) {
    const auto idx = index(a);
    const double b = std::min(t1, static_cast<double>(idx + 1) * step_);
    slot(idx).sums[series][line] += amount * (b - a) / span;
    if (b <= a) break;
    a = b;
  }
}

void LiveSeries::set(double t, const std::string& series, const std::string& line, double value) {
  slot(index(t)).gauges[series][line] = value;
  gauge_now_[series][line] = value;
}

boost::json::object LiveSeries::rate_lines(const std::string& series, double now, double scale) const {
  const auto last = index(now) - 1;  // the current slot is still filling: its rate would dip
  const auto first = last - static_cast<std::int64_t>(ring_.size()) + 1;
  std::set<std::string> names;
  for (auto i = first; i <= last; ++i)
    if (const auto* s = find(i); s && s->sums.count(series))
      for (const auto& [line, v] : s->sums.at(series)) names.insert(line);
  boost::json::object out;
  for (const auto& name : names) {
    boost::json::array pts;
    for (auto i = first; i <= last; ++i) {
      double v = 0;
      if (const auto* s = find(i); s && s->sums.count(series)) {
        const auto& m = s->sums.at(series);
        if (const auto it = m.find(name); it != m.end()) v = it->second;
      }
      pts.push_back(boost::json::array{static_cast<double>(i) * step_, v / step_ * scale});
    }
    out[name] = std::move(pts);
  }
  return out;
}

boost::json::object LiveSeries::gauge_lines(const std::string& series, double now) const {
  boost::json::object out;
  const auto g = gauge_now_.find(series);
  if (g == gauge_now_.end()) return out;
  const auto last = index(now);
  const auto first = last - static_cast<std::int64_t>(ring_.size()) + 1;
  const auto sample = [&](std::int64_t i, const std::string& name) -> const double* {
    const auto* s = find(i);
    if (!s) return nullptr;
    const auto m = s->gauges.find(series);
    if (m == s->gauges.end()) return nullptr;
    const auto it = m->second.find(name);
    return it == m->second.end() ? nullptr : &it->second;
  };
  for (const auto& [name, current] : g->second) {
    // Before the first sample in the window the value is the one that sample replaced; the
    // first sample is the best guess we have (or the current value when none is in reach).
    double held = current;
    for (auto i = first; i <= last; ++i)
      if (const auto* v = sample(i, name)) {
        held = *v;
        break;
      }
    boost::json::array pts;
    for (auto i = first; i <= last; ++i) {
      if (const auto* v = sample(i, name)) held = *v;
      pts.push_back(boost::json::array{static_cast<double>(i) * step_, held});
    }
    out[name] = std::move(pts);
  }
  return out;
}

boost::json::object LiveSeries::ratio_lines(const std::string& num, const std::string& other, double now) const {
  const auto a = rate_lines(num, now, 1.0);
  const auto b = rate_lines(other, now, 1.0);
  std::set<std::string> names;
  for (const auto& kv : a) names.insert(std::string(kv.key()));
  for (const auto& kv : b) names.insert(std::string(kv.key()));
  boost::json::object out;
  for (const auto& name : names) {
    const auto* pa = a.if_contains(name);
    const auto* pb = b.if_contains(name);
    const auto& ref = (pa ? pa : pb)->as_array();
    boost::json::array pts;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double x = pa ? pa->as_array()[i].as_array()[1].to_number<double>() : 0.0;
      const double y = pb ? pb->as_array()[i].as_array()[1].to_number<double>() : 0.0;
      const auto t = ref[i].as_array()[0];
      if (x + y > 0) pts.push_back(boost::json::array{t, x / (x + y)});
      else pts.push_back(boost::json::array{t, nullptr});
    }
    out[name] = std::move(pts);
  }
  return out;
}

}  // namespace tidegate::cost
