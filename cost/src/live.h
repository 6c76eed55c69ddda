#pragma once
// A short ring of fixed-step slots (default 5 s x 120) behind the live dashboard. Amounts that
// span slots are split by time; gauges carry their last value forward.
#include <boost/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tidegate::cost {

class LiveSeries final {
 public:
  LiveSeries(double step_s, int points);

  // Adds `amount` spread over [t0, t1) (a point when t1 <= t0) to series/line.
  void add(double t0, double t1, const std::string& series, const std::string& line, double amount);
  void set(double t, const std::string& series, const std::string& line, double value);

  // Lines of one series as [[t, value], ...] over the window ending at `now`; sums are divided
  // by the step and multiplied by `scale` (so scale 1 gives per second, 3600 per hour).
  boost::json::object rate_lines(const std::string& series, double now, double scale) const;
  boost::json::object gauge_lines(const std::string& series, double now) const;
  // Per-slot ratio num / (num + other) for lines present in either series; null where no data.
  boost::json::object ratio_lines(const std::string& num, const std::string& other, double now) const;
  double step() const { return step_; }

 private:
  struct Slot {
    std::int64_t idx = -1;
    std::map<std::string, std::map<std::string, double>> sums;    // series -> line -> amount
    std::map<std::string, std::map<std::string, double>> gauges;  // series -> line -> last value
  };
  Slot& slot(std::int64_t idx);
  const Slot* find(std::int64_t idx) const;
  std::int64_t index(double t) const;

  double step_;
  std::vector<Slot> ring_;
  std::map<std::string, std::map<std::string, double>> gauge_now_;  // latest value, for carry-forward
};

}  // namespace tidegate::cost
