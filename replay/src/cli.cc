#include "tidegate/replay/cli.h"

#include "tidegate/replay/variants.h"

#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

namespace tidegate::replay {
namespace {

double number(const std::string& flag, const std::string& text, double lo, double hi) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v))
    throw CliError(flag + ": '" + text + "' is not a number");
  if (v < lo || v > hi) {
    std::ostringstream m;
    m << flag << ": " << text << " is out of range [" << lo << ", " << hi << "]";
    throw CliError(m.str());
  }
  return v;
}

int integer(const std::string& flag, const std::string& text, int lo, int hi) {
  const double v = number(flag, text, lo, hi);
  if (v != std::floor(v)) throw CliError(flag + ": '" + text + "' is not a whole number");
  return static_cast<int>(v);
}

template <typename T>
std::vector<T> list(const std::string& flag, const std::string& text, double lo, double hi) {
  std::vector<T> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(static_cast<T>(number(flag, item, lo, hi)));
  if (out.empty()) throw CliError(flag + ": empty list");
  return out;
}

}  // namespace

std::string usage() {
  return "usage: tidegate-replay --trace FILE [options]\n"
         "  --format azure|burstgpt|mooncake|auto  trace format (default: detected from the content)\n"
         "  --window-s FROM:TO             replay only the trace's requests from FROM to TO seconds after its\n"
         "                                 first (TO may be empty: to the end), before --load-factor\n"
         "  --trace-model NAME             replay only this model's rows (BurstGPT's Model: ChatGPT, GPT-4)\n"
         "  --config FILE                  YAML with replay: (profile, slo, replicas, baselines) and policy:\n"
         "  --replicas-min N  --replicas-max N\n"
         "  --initial-replicas N|auto      fleet at t=0 (auto: the cheapest static fleet, found first)\n"
         "  --warmup-s S                   decisions are not applied before S (default 60)\n"
         "  --cold-start-s S               replica cold start (default: the profile's, 60)\n"
         "  --slo-ttft-ms X  --slo-e2e-ms Y  --slo-attainment F (default 0.99)\n"
         "  --load-factor F                scale the arrival rate (2 = twice as fast)\n"
         "  --repeat N                     the trace N times end to end (before --variant): traffic longer than\n"
         "                                 the policy's hour of memory\n"
         "  --variant SPEC                 replay a burstier variant: onoff, spikes, mmpp, wave, split\n"
         "                                 with key=value parameters, e.g. onoff:gap_min=300,seed=2\n"
         "  --warm-pool N                  Tidegate's warm pool size for the main run\n"
         "  --balancer NAME                least_outstanding (default), round_robin, prefix_aware, or ideal (a\n"
         "                                 bound: least_outstanding with one infinite prefix cache shared by the\n"
         "                                 fleet), for every policy's run (the offline optimum's search keeps\n"
         "                                 least_outstanding)\n"
         "  --prefix-load-bound F          prefix_aware: no replica above F x its share of the load (default 1.25)\n"
         "  --on-bad-row skip|fail         malformed rows: skip with a warning (default) or stop\n"
         "  --on-unsorted sort|fail        out-of-order timestamps: sort with a warning (default) or stop\n"
         "  --json                         last stdout line: the summary as one JSON object\n"
         "  --out-dir DIR                  write timeline.csv, timeline.svg (and baselines.txt)\n"
         "  --baselines                    also run static (searched), the offline optimum (--no-optimum\n"
         "                                 skips it), HPA, KPA, Tidegate +/- warm pool\n"
         "  --tune                         search policy parameters on the first part of the trace, validate\n"
         "                                 on the rest; print the frontier, the YAML and the held-back figures\n"
         "  --tune-headroom L --tune-burst-memory L --tune-noise-z L --tune-scale-down L --tune-warm-pool L\n"
         "                                 comma-separated grids for --tune (scale-down 0 = auto)\n"
         "  --tune-share F                 share of the trace (from the start) to tune on (default 0.667)\n"
         "  --threads N                    parallel runs for --baselines/--tune (default: cores)\n"
         "  --progress / --no-progress     progress bar on stderr (default: when stderr is a terminal)\n";
}

CliArgs parse_cli(int argc, const char* const* argv) {
  CliArgs a;
  std::map<std::string, std::string> values;
  std::vector<std::string> order;
  static const char* kBool[] = {"--json", "--baselines", "--tune", "--help", "-h", "--progress", "--no-progress",
                                "--no-optimum"};
  static const char* kValued[] = {"--trace", "--format", "--config", "--replicas-min", "--replicas-max",
                                  "--initial-replicas", "--balancer", "--prefix-load-bound", "--warmup-s", "--cold-start-s", "--slo-ttft-ms", "--slo-e2e-ms", "--slo-attainment",
                                  "--load-factor", "--window-s", "--trace-model", "--repeat", "--variant", "--warm-pool", "--on-bad-row", "--on-unsorted", "--out-dir",
                                  "--threads", "--tune-headroom", "--tune-burst-memory", "--tune-noise-z",
                                  "--tune-scale-down", "--tune-warm-pool", "--tune-share"};
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    const auto eq = flag.find('=');
    if (eq != std::string::npos) value = flag.substr(eq + 1), flag = flag.substr(0, eq);
    bool known = false;
    for (const char* b : kBool)
      if (flag == b) known = true, values[flag] = "1";
    for (const char* v : kValued)
      if (flag == v) {
        known = true;
        if (eq == std::string::npos) {
          if (i + 1 >= argc) throw CliError(flag + " needs a value");
          value = argv[++i];
        }
        values[flag] = value;
      }
    if (!known) throw CliError("unknown option '" + flag + "'");
  }
  auto get = [&](const char* f) -> std::optional<std::string> {
    auto it = values.find(f);
    return it == values.end() ? std::nullopt : std::optional(it->second);
  };
  if (get("--help") || get("-h")) {
    a.help = true;
    return a;
  }
  if (!get("--trace")) throw CliError("--trace FILE is required");
  a.trace = *get("--trace");
  a.config = default_config();
  if (auto v = get("--config")) a.config = load_config_file(*v, a.config);
  if (auto v = get("--format")) {
    try {
      a.format = trace_format_from_string(*v);
    } catch (const std::invalid_argument& e) {
      throw CliError(std::string("--format: ") + e.what());
    }
  }
  if (auto v = get("--on-bad-row")) {
    if (*v != "skip" && *v != "fail") throw CliError("--on-bad-row: expected skip or fail, got '" + *v + "'");
    a.on_bad_row = *v == "skip" ? BadRowPolicy::kSkip : BadRowPolicy::kFail;
  }
  if (auto v = get("--on-unsorted")) {
    if (*v != "sort" && *v != "fail") throw CliError("--on-unsorted: expected sort or fail, got '" + *v + "'");
    a.on_unsorted = *v == "sort" ? UnsortedPolicy::kSort : UnsortedPolicy::kFail;
  }
  auto& o = a.config.options;
  if (auto v = get("--replicas-min")) o.replicas_min = integer("--replicas-min", *v, 1, 10000);
  if (auto v = get("--replicas-max")) o.replicas_max = integer("--replicas-max", *v, 1, 10000);
  if (auto v = get("--initial-replicas"))
    o.initial_active = *v == "auto" ? 0 : integer("--initial-replicas", *v, 1, 10000);
  if (auto v = get("--warmup-s")) o.warmup_s = number("--warmup-s", *v, 0, 86400);
  if (auto v = get("--balancer"))
    if (!parse_balancer(*v, &o.balancer))
      throw CliError("--balancer: expected least_outstanding, round_robin, prefix_aware or ideal, got '" + *v + "'");
  if (auto v = get("--prefix-load-bound")) o.prefix_aware.load_bound = number("--prefix-load-bound", *v, 1, 100);
  if (auto v = get("--cold-start-s")) o.profile.cold_start_s = number("--cold-start-s", *v, 0, 7200);
  if (o.replicas_min > o.replicas_max)
    throw CliError("--replicas-min (" + std::to_string(o.replicas_min) + ") exceeds --replicas-max (" +
                   std::to_string(o.replicas_max) + ")");
  if (o.initial_active > 0) o.initial_active = std::clamp(o.initial_active, o.replicas_min, o.replicas_max);
  a.config.tidegate.policy.min_replicas = o.replicas_min;
  a.config.tidegate.policy.max_replicas = o.replicas_max;
  if (auto v = get("--slo-ttft-ms")) o.slo.ttft_s = number("--slo-ttft-ms", *v, 1, 3.6e6) / 1000;
  if (auto v = get("--slo-e2e-ms")) o.slo.e2e_s = number("--slo-e2e-ms", *v, 1, 8.64e7) / 1000;
  if (auto v = get("--slo-attainment")) o.slo.attainment = number("--slo-attainment", *v, 0.01, 1);
  if (auto v = get("--load-factor")) a.load_factor = number("--load-factor", *v, 0.001, 1000);
  if (auto v = get("--window-s")) {
    const auto colon = v->find(':');
    if (colon == std::string::npos) throw CliError("--window-s: expected FROM:TO in seconds, got '" + *v + "'");
    a.window_from_s = number("--window-s", v->substr(0, colon), 0, 1e12);
    if (colon + 1 < v->size()) a.window_to_s = number("--window-s", v->substr(colon + 1), 0, 1e12);
    if (!(a.window_to_s > a.window_from_s))
      throw CliError("--window-s: TO must be after FROM, got '" + *v + "'");
  }
  if (auto v = get("--trace-model")) {
    if (v->empty()) throw CliError("--trace-model: empty model name");
    a.trace_model = *v;
  }
  if (auto v = get("--repeat")) a.repeat = integer("--repeat", *v, 1, 1000);
  if (auto v = get("--variant")) {
    try {
      parse_variant(*v);
    } catch (const std::invalid_argument& e) {
      throw CliError(std::string("--variant: ") + e.what());
    }
    a.variant = *v;
  }
  if (auto v = get("--warm-pool")) a.config.tidegate.warm_pool_size = integer("--warm-pool", *v, 0, 1000);
  if (auto v = get("--threads")) a.threads = static_cast<unsigned>(integer("--threads", *v, 1, 256));
  if (auto v = get("--out-dir")) a.out_dir = *v;
  if (auto v = get("--tune-headroom")) a.grid.headroom = list<double>("--tune-headroom", *v, 0.1, 10);
  if (auto v = get("--tune-burst-memory")) a.grid.burst_memory_s = list<double>("--tune-burst-memory", *v, 0, 604800);
  if (auto v = get("--tune-noise-z")) a.grid.noise_z = list<double>("--tune-noise-z", *v, 0, 10);
  if (auto v = get("--tune-scale-down")) a.grid.scale_down_stabilization_s = list<double>("--tune-scale-down", *v, 0, 86400);
  if (auto v = get("--tune-share")) a.grid.tune_share = number("--tune-share", *v, 0.2, 0.9);
  if (auto v = get("--tune-warm-pool")) a.grid.warm_pool_size = list<int>("--tune-warm-pool", *v, 0, 1000);
  align_policy(a.config);
  a.json = get("--json").has_value();
  a.baselines = get("--baselines").has_value();
  a.optimum = !get("--no-optimum").has_value();
  a.tune = get("--tune").has_value();
  if (get("--progress")) a.progress = ProgressMode::kOn;
  if (get("--no-progress")) a.progress = ProgressMode::kOff;
  try {
    validate(o);
  } catch (const std::invalid_argument& e) {
    throw CliError(e.what());
  }
  return a;
}

}  // namespace tidegate::replay
