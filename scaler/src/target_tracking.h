#pragma once
// Target tracking over plain signals (concurrency, queue, GPU utilisation, KV usage), Knative
// KPA style: the mean over a stable window sets the count, a short panic window scales up at
// once when demand reaches panic_threshold x capacity and blocks scale-down until a stable
// window passes without panic.
#include <string>
#include <vector>

#include "tidegate/scaler/policy.h"

namespace tidegate::scaler::detail {

struct Tracking {
  bool any = false;  // some signal with a target was present
  int desired = 0;
  bool panic = false;
  std::string reason_code;
  std::string reason;
  std::vector<SignalRecommendation> signals;
};

bool has_targets(const SignalTargets& t);
Tracking track_targets(const PolicyConfig& config, PolicyState& state, const PolicyInput& input);

int ceil_count(double x);  // ceil that forgives floating noise: 4.0000000001 replicas is 4
std::string fmt(const char* format, double a);

}  // namespace tidegate::scaler::detail
