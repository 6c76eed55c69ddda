// parse_prometheus_text (scaler/src/signals.cc), the parser the scaler runs on every replica's
// /metrics, plus the extractors that read its output.
// Checks, beyond ASan/UBSan: every sample has a well-formed metric name; the parser is line-local
// (parsing line by line and concatenating gives the same samples as parsing the whole text,
// which is what makes a scrape cut mid-line harmless to the lines before it); the engine
// metrics summed from finite samples are never NaN.
#include <cmath>
#include <cstring>
#include <string>

#include "fuzz_util.h"
#include "tidegate/scaler/signals.h"

using tidegate::scaler::PromSample;

namespace {

bool same(const std::vector<PromSample>& a, const std::vector<PromSample>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].labels != b[i].labels) return false;
    const double x = a[i].value, y = b[i].value;
    if (!(x == y || (std::isnan(x) && std::isnan(y)))) return false;
  }
  return true;
}

bool name_ok(const std::string& n) {
  if (n.empty()) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto samples = tidegate::scaler::parse_prometheus_text(text);
  for (const auto& s : samples) {
    FUZZ_CHECK(name_ok(s.name), "metric name", s.name);
    for (const auto& [k, v] : s.labels) FUZZ_CHECK(name_ok(k), "label name", k);
  }

  std::vector<PromSample> by_line;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    for (auto& s : tidegate::scaler::parse_prometheus_text(text.substr(pos, eol - pos))) by_line.push_back(std::move(s));
    pos = eol + 1;
  }
  FUZZ_CHECK(same(samples, by_line), "line-by-line parse differs from the whole-text parse", text);

  const auto m = tidegate::scaler::extract_engine_metrics(samples);
  // Sums and means of finite samples: never NaN (prefix_queries_total is left out: llama.cpp's is
  // the sum of two sums, +Inf + -Inf when a replica prints +-1e308s).
  for (const auto* v : {&m.waiting, &m.running, &m.kv_usage, &m.prefix_hits_total, &m.prefix_hit_rate})
    if (*v) FUZZ_CHECK(!std::isnan(**v), "an extracted engine metric is NaN", text);
  if (const auto u = tidegate::scaler::dcgm_gpu_util(samples, {}))
    FUZZ_CHECK(!std::isnan(*u), "dcgm utilisation is NaN", text);
  (void)tidegate::scaler::dcgm_gpu_util(samples, {0, 1});
  return 0;
}
