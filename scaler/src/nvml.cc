// NVML through dlopen: the scaler must run on machines without a driver (CI, CPU-only
// demos), so nothing links against libnvidia-ml. Types are declared here from the public
// NVML ABI (opaque device handle, utilization struct of two unsigned ints).
#include <dlfcn.h>

#include "tidegate/scaler/signals.h"

namespace tidegate::scaler {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = void*;
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
constexpr nvmlReturn_t kNvmlSuccess = 0;

}  // namespace

struct NvmlGpuUtil::Fns {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned int*) = nullptr;
  nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
};

NvmlGpuUtil::NvmlGpuUtil() : fns_(std::make_unique<Fns>()) {
  handle_ = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* err = ::dlerror();
    why_ = err ? err : "libnvidia-ml.so.1 not found";
    return;
  }
  auto sym = [&](const char* name) { return ::dlsym(handle_, name); };
  fns_->init = reinterpret_cast<decltype(fns_->init)>(sym("nvmlInit_v2"));
  fns_->shutdown = reinterpret_cast<decltype(fns_->shutdown)>(sym("nvmlShutdown"));
  fns_->count = reinterpret_cast<decltype(fns_->count)>(sym("nvmlDeviceGetCount_v2"));
  fns_->handle = reinterpret_cast<decltype(fns_->handle)>(sym("nvmlDeviceGetHandleByIndex_v2"));
  fns_->util = reinterpret_cast<decltype(fns_->util)>(sym("nvmlDeviceGetUtilizationRates"));
  if (!fns_->init || !fns_->shutdown || !fns_->count || !fns_->handle || !fns_->util) {
    why_ = "libnvidia-ml.so.1 lacks the expected symbols";
  } else if (fns_->init() != kNvmlSuccess) {
    why_ = "nvmlInit_v2 failed (no driver loaded?)";
  } else if (fns_->count(&devices_) != kNvmlSuccess || devices_ == 0) {
    devices_ = 0;
    why_ = "no NVIDIA devices";
    fns_->shutdown();
  } else {
    return;
  }
  ::dlclose(handle_);
  handle_ = nullptr;
}

NvmlGpuUtil::~NvmlGpuUtil() {
  if (!handle_) return;
  fns_->shutdown();
  ::dlclose(handle_);
}

std::optional<double> NvmlGpuUtil::utilisation(const std::vector<int>& gpus) const {
  if (!available()) return std::nullopt;
  std::vector<unsigned> indices;
  if (gpus.empty()) {
    for (unsigned i = 0; i < devices_; ++i) indices.push_back(i);
  } else {
    for (int g : gpus)
      if (g >= 0 && static_cast<unsigned>(g) < devices_) indices.push_back(static_cast<unsigned>(g));
  }
  double sum = 0;
  int n = 0;
  for (unsigned i : indices) {
    nvmlDevice_t dev = nullptr;
    nvmlUtilization_t u{};
    if (fns_->handle(i, &dev) != kNvmlSuccess || fns_->util(dev, &u) != kNvmlSuccess) continue;
    sum += u.gpu;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n / 100.0;
}

}  // namespace tidegate::scaler
