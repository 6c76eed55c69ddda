#pragma once
// Deterministic synthetic traces for tests: exponential inter-arrivals from a fixed-seed LCG.
#include <cmath>
#include <cstdint>

#include "tidegate/replay/trace.h"

namespace tidegate::replay::testing {

inline Trace synthetic_trace(std::size_t n, double rate_per_s, std::int64_t prompt, std::int32_t output,
                             std::uint64_t seed = 42) {
  Trace t;
  t.format = TraceFormat::kAzure;
  std::uint64_t x = seed;
  auto uniform = [&x] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return (static_cast<double>(x >> 11) + 0.5) / 9007199254740992.0;
  };
  double now = 0;
  for (std::size_t i = 0; i < n; ++i) {
    TraceRequest r;
    r.arrival_s = now;
    r.prompt_tokens = prompt / 2 + static_cast<std::int64_t>(uniform() * static_cast<double>(prompt));
    r.output_tokens = output / 2 + static_cast<std::int32_t>(uniform() * output);
    t.requests.push_back(r);
    now += -std::log(uniform()) / rate_per_s;
  }
  return t;
}

}  // namespace tidegate::replay::testing
