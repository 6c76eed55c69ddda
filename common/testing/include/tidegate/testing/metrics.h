#pragma once
// Reading a test's own prometheus registry: the sum of a family's series.
#include <prometheus/registry.h>

#include <string>

namespace tidegate::testing {

// Sum of every series of a counter or gauge family (optionally only where label == value).
inline double metric_sum(prometheus::Registry& registry, const std::string& family, const std::string& label = "",
                         const std::string& value = "") {
  double sum = 0;
  for (const auto& f : registry.Collect()) {
    if (f.name != family) continue;
    for (const auto& m : f.metric) {
      bool match = label.empty();
      for (const auto& l : m.label)
        if (l.name == label && l.value == value) match = true;
      if (!match) continue;
      sum += f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  return sum;
}

}  // namespace tidegate::testing
