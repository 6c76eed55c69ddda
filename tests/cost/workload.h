#pragma once
// A small deterministic workload driven through the real CostAccounting in virtual time:
// replicas changing state, tenants streaming requests with progress reports, cache hits.
// Used by the dashboard demo server and the browser test.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tidegate/cost/accounting.h"

namespace tidegate::cost::demo {

extern const char* const kDemoConfig;  // the `cost:` section the demo runs with

class Workload final {
 public:
  Workload(CostAccounting& acc, double t0);
  // Simulates everything between the last call and t in 0.5 s ticks.
  void advance_to(double t);

 private:
  struct Live {
    std::uint64_t handle;
    std::int64_t prompt, completion, produced;
    int tenant;
  };
  void tick(double t);

  CostAccounting& acc_;
  std::mt19937_64 rng_{42};
  double t_;
  std::vector<std::string> active_, warm_;
  std::vector<Live> live_;
  std::uint64_t ticks_ = 0;
};

}  // namespace tidegate::cost::demo
