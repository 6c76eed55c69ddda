#pragma once
// The recent decisions of one pool, as GET /admin/scaler shows them. A tick that changes
// nothing is a "hold"; one a second would push every real decision (up, down) out of a
// bounded list within minutes. So consecutive identical holds collapse into one record with a
// count and its first and last time, and when the list is full the oldest hold goes first.
#include <boost/json.hpp>

#include <cstdint>
#include <deque>
#include <string>

#include "tidegate/scaler/policy.h"

namespace tidegate::scaler {

struct DecisionRecord {
  Decision decision;         // the latest of the run
  std::uint64_t count = 1;   // decisions collapsed into this record
  double first_t = 0;        // the run's first decision: the policy's (monotonic) clock ...
  double first_wall_s = 0;   // ... and unix seconds
  double wall_s = 0;         // unix seconds of `decision`
  bool actuated = true;      // false: taken as a follower (leader election), not acted on
};

class DecisionLog final {
 public:
  explicit DecisionLog(std::size_t kept) : kept_(kept < 1 ? 1 : kept) {}
  void push(Decision d, double wall_s, bool actuated = true);
  const std::deque<DecisionRecord>& records() const { return records_; }

 private:
  std::size_t kept_;
  std::deque<DecisionRecord> records_;
};

// "2025-06-01T12:00:00.250Z"
std::string iso8601_utc(double unix_s);

// One record for the admin API: wall-clock times ("t" unix seconds, "time" ISO-8601 UTC, the
// same for the run's first), the policy clock as "t_monotonic", and the decision's fields.
boost::json::object decision_record_json(const DecisionRecord& r);

}  // namespace tidegate::scaler
