#include "tidegate/scaler/signals.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace tidegate::scaler {
namespace {

void skip_spaces(std::string_view s, std::size_t& i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
}

bool name_char(char c, bool first) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

std::optional<double> parse_value(std::string_view v) {
  if (v == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (v == "+Inf" || v == "Inf") return std::numeric_limits<double>::infinity();
  if (v == "-Inf") return -std::numeric_limits<double>::infinity();
  const std::string copy(v);
  char* end = nullptr;
  const double d = std::strtod(copy.c_str(), &end);
  if (end == copy.c_str() || *end != '\0') return std::nullopt;
  return d;
}

// Parses `{a="x",b="y\"z"}` from s[i] == '{'; false on malformed input.
bool parse_labels(std::string_view s, std::size_t& i, std::map<std::string, std::string>& out) {
  ++i;
  while (true) {
    skip_spaces(s, i);
    if (i < s.size() && s[i] == '}') return ++i, true;
    const std::size_t start = i;
    while (i < s.size() && name_char(s[i], i == start)) ++i;
    if (i == start) return false;
    std::string key(s.substr(start, i - start));
    skip_spaces(s, i);
    if (i >= s.size() || s[i] != '=') return false;
    ++i;
    skip_spaces(s, i);
    if (i >= s.size() || s[i] != '"') return false;
    ++i;
    std::string value;
    while (i < s.size() && s[i] != '"') {
      if (s[i] == '\\' && i + 1 < s.size()) {
        ++i;
        value += s[i] == 'n' ? '\n' : s[i];
      } else {
        value += s[i];
      }
      ++i;
    }
    if (i >= s.size()) return false;
    ++i;
    out.emplace(std::move(key), std::move(value));
    skip_spaces(s, i);
    if (i < s.size() && s[i] == ',') ++i;
  }
}

struct Found {
  double sum = 0;
  int n = 0;
};

Found find(const std::vector<PromSample>& samples, std::string_view name) {
  Found f;
  for (const auto& s : samples)
    if (s.name == name && std::isfinite(s.value)) f.sum += s.value, ++f.n;
  return f;
}

}  // namespace

std::vector<PromSample> parse_prometheus_text(std::string_view text) {
  std::vector<PromSample> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t i = 0;
    skip_spaces(line, i);
    if (i >= line.size() || line[i] == '#') continue;
    PromSample sample;
    const std::size_t start = i;
    while (i < line.size() && name_char(line[i], i == start)) ++i;
    if (i == start) continue;
    sample.name = std::string(line.substr(start, i - start));
    skip_spaces(line, i);
    if (i < line.size() && line[i] == '{' && !parse_labels(line, i, sample.labels)) continue;
    skip_spaces(line, i);
    std::size_t vend = i;
    while (vend < line.size() && line[vend] != ' ' && line[vend] != '\t') ++vend;
    const auto value = parse_value(line.substr(i, vend - i));
    if (!value) continue;
    sample.value = *value;
    out.push_back(std::move(sample));
  }
  return out;
}

// The names each engine exports today; sources in scaler/README.md ("Engine metrics"). The
// first engine whose name matches fills a slot; later (older) names only fill empty ones.
EngineMetrics extract_engine_metrics(const std::vector<PromSample>& samples) {
  EngineMetrics m;
  auto take = [&](std::optional<double>& slot, std::string_view name, const char* engine, bool mean) {
    if (slot) return;
    const Found f = find(samples, name);
    if (f.n == 0) return;
    slot = mean ? f.sum / f.n : f.sum;
    if (m.engine.empty()) m.engine = engine;
  };
  // vLLM V1 (0.10, 0.11): labels model_name and engine (one series per data-parallel engine).
  take(m.waiting, "vllm:num_requests_waiting", "vllm", false);
  take(m.running, "vllm:num_requests_running", "vllm", false);
  take(m.kv_usage, "vllm:kv_cache_usage_perc", "vllm", true);
  take(m.kv_usage, "vllm:gpu_cache_usage_perc", "vllm", true);  // before 0.10 (hidden since)
  take(m.prefix_queries_total, "vllm:prefix_cache_queries_total", "vllm", false);
  take(m.prefix_hits_total, "vllm:prefix_cache_hits_total", "vllm", false);
  take(m.prefix_queries_total, "vllm:gpu_prefix_cache_queries_total", "vllm", false);  // 0.8, 0.9
  take(m.prefix_hits_total, "vllm:gpu_prefix_cache_hits_total", "vllm", false);
  take(m.prefix_hit_rate, "vllm:gpu_prefix_cache_hit_rate", "vllm", true);  // V0
  // SGLang: scheduler gauges (labels model_name, engine_type, tp_rank, pp_rank, ...; only
  // attention-TP rank 0 reports by default) and the tokenizer's token counters.
  take(m.waiting, "sglang:num_queue_reqs", "sglang", false);
  take(m.running, "sglang:num_running_reqs", "sglang", false);
  take(m.kv_usage, "sglang:token_usage", "sglang", true);
  if (find(samples, "sglang:cached_tokens_total").n > 0) {
    take(m.prefix_queries_total, "sglang:prompt_tokens_total", "sglang", false);  // whole prompts
    take(m.prefix_hits_total, "sglang:cached_tokens_total", "sglang", false);
  }
  take(m.prefix_hit_rate, "sglang:cache_hit_rate", "sglang", true);
  // TGI: no KV-usage and no prefix-cache metric.
  take(m.waiting, "tgi_queue_size", "tgi", false);
  take(m.running, "tgi_batch_current_size", "tgi", false);
  // llama.cpp's llama-server (--metrics): no KV-usage metric any more (kv_cache_usage_ratio and
  // kv_cache_tokens were removed). Builds that count cached prompt tokens give the prefix
  // cache: prompt_tokens_total excludes them, so the tokens looked up are the sum of the two.
  take(m.waiting, "llamacpp:requests_deferred", "llamacpp", false);
  take(m.running, "llamacpp:requests_processing", "llamacpp", false);
  take(m.kv_usage, "llamacpp:kv_cache_usage_ratio", "llamacpp", true);  // builds from before its removal
  if (!m.prefix_queries_total) {
    const Found cached = find(samples, "llamacpp:prompt_tokens_cached_total");
    const Found processed = find(samples, "llamacpp:prompt_tokens_total");
    if (cached.n > 0 && processed.n > 0) {
      m.prefix_hits_total = cached.sum;
      m.prefix_queries_total = cached.sum + processed.sum;
      // llama-server prints doubles with 6 significant digits: 1234567 tokens reads 1.23457e+06.
      const double q = std::max(1.0, *m.prefix_queries_total);
      m.prefix_resolution = std::pow(10.0, std::floor(std::log10(q)) - 5);
      if (m.engine.empty()) m.engine = "llamacpp";
    }
  }
  return m;
}

std::optional<double> dcgm_gpu_util(const std::vector<PromSample>& samples, const std::vector<int>& gpus) {
  double sum = 0;
  int n = 0;
  for (const auto& s : samples) {
    if (s.name != "DCGM_FI_DEV_GPU_UTIL" || !std::isfinite(s.value)) continue;
    if (!gpus.empty()) {
      const auto it = s.labels.find("gpu");
      if (it == s.labels.end()) continue;
      bool wanted = false;
      for (int g : gpus) wanted = wanted || it->second == std::to_string(g);
      if (!wanted) continue;
    }
    sum += s.value;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n / 100.0;
}

}  // namespace tidegate::scaler
