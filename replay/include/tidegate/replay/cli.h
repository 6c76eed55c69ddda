#pragma once
// Command line of tidegate-replay: flags override the config file, which overrides defaults.
#include <limits>
#include <stdexcept>
#include <string>

#include "tidegate/replay/config.h"
#include "tidegate/replay/suite.h"
#include "tidegate/replay/trace.h"

namespace tidegate::replay {

class CliError final : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ProgressMode { kAuto, kOn, kOff };

struct CliArgs {
  bool help = false;
  std::string trace;
  TraceFormat format = TraceFormat::kAuto;
  BadRowPolicy on_bad_row = BadRowPolicy::kSkip;
  UnsortedPolicy on_unsorted = UnsortedPolicy::kSort;
  double load_factor = 1.0;
  double window_from_s = 0;  // --window-s FROM:TO, the trace's own seconds from its first request
  double window_to_s = std::numeric_limits<double>::infinity();
  std::string trace_model;   // --trace-model: only this model's rows (BurstGPT)
  int repeat = 1;                 // --repeat N: the trace N times end to end, before the variant
  std::string variant = "none";  // a burstier variant of the trace (variants.h)
  bool json = false;
  bool baselines = false;
  bool optimum = true;  // with --baselines: also search the offline optimum
  bool tune = false;
  std::string out_dir;
  unsigned threads = 0;  // 0 = hardware concurrency
  ProgressMode progress = ProgressMode::kAuto;
  ReplayConfig config;   // defaults <- --config file <- flags
  TunerGrid grid;
};

// Throws CliError for unknown flags, missing values and absurd numbers (with the flag named),
// ConfigError for config files.
CliArgs parse_cli(int argc, const char* const* argv);
std::string usage();

}  // namespace tidegate::replay
