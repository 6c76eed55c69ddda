#pragma once
// Engine and GPU signals: a small Prometheus text-format parser, the metric names of the
// common engines (vLLM, SGLang, TGI, llama.cpp) and of NVIDIA's DCGM exporter, and NVML loaded with
// dlopen when the driver is there. Missing metrics are reported, never fatal.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tidegate::scaler {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Exposition format 0.0.4 (what every engine serves). Comments, HELP/TYPE lines and
// malformed lines are skipped; NaN/+Inf/-Inf are accepted.
std::vector<PromSample> parse_prometheus_text(std::string_view text);

// One replica's engine view, summed over label sets (vLLM labels by model_name).
struct EngineMetrics {
  std::optional<double> waiting;   // queued in the engine
  std::optional<double> running;   // being generated
  std::optional<double> kv_usage;  // 0..1
  // Prefix caching: prompt tokens looked up and found cached (cumulative counters: vLLM,
  // SGLang, llama.cpp), or a hit-rate gauge where that is all an engine has (vLLM V0).
  std::optional<double> prefix_queries_total, prefix_hits_total;
  std::optional<double> prefix_hit_rate;
  double prefix_resolution = 0;    // tokens: how coarsely the engine prints those counters (0 = exactly)
  std::string engine;              // "vllm", "tgi", "llamacpp", "sglang" or "" when unknown
};

EngineMetrics extract_engine_metrics(const std::vector<PromSample>& samples);

// Mean DCGM_FI_DEV_GPU_UTIL (percent) as a fraction, over `gpus` ("gpu" label) or all when
// empty. nullopt when the exporter has no such series.
std::optional<double> dcgm_gpu_util(const std::vector<PromSample>& samples, const std::vector<int>& gpus);

// GPU utilisation straight from the driver. Absent library or no devices: available() false.
class NvmlGpuUtil final {
 public:
  NvmlGpuUtil();
  ~NvmlGpuUtil();
  NvmlGpuUtil(const NvmlGpuUtil&) = delete;
  NvmlGpuUtil& operator=(const NvmlGpuUtil&) = delete;
  bool available() const { return handle_ != nullptr && devices_ > 0; }
  const std::string& why_unavailable() const { return why_; }
  unsigned device_count() const { return devices_; }
  // Mean utilisation (0..1) over the given device indices, or all when empty.
  std::optional<double> utilisation(const std::vector<int>& gpus) const;

 private:
  void* handle_ = nullptr;
  unsigned devices_ = 0;
  std::string why_;
  struct Fns;
  std::unique_ptr<Fns> fns_;
};

}  // namespace tidegate::scaler
