#include "tidegate/replay/variants.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

namespace tidegate::replay {
namespace {

const std::map<std::string, std::map<std::string, double>>& defaults() {
  static const std::map<std::string, std::map<std::string, double>> d = {
      {"none", {}},
      {"onoff", {{"on_min", 60}, {"on_max", 120}, {"gap_min", 480}, {"gap_max", 720}, {"background", 0.05}}},
      {"spikes", {{"every", 600}, {"spike_s", 90}, {"mult", 5}}},
      {"mmpp", {{"high", 120}, {"low", 480}, {"ratio", 6}}},
      {"wave", {{"period", 1800}, {"amplitude", 0.6}}},
      {"split", {{"from", 0}, {"to", 1e18}}},
  };
  return d;
}

double arg(const VariantSpec& s, const char* key) { return s.args.at(key); }

// A warp made of segments in new time, each replaying the original timeline at `speed`
// (original seconds per new second). Maps original times to new ones.
struct Warp {
  std::vector<double> orig_start, new_start, speed;

  double map(double t) const {
    auto it = std::upper_bound(orig_start.begin(), orig_start.end(), t);
    const std::size_t k = it == orig_start.begin() ? 0 : static_cast<std::size_t>(it - orig_start.begin() - 1);
    return new_start[k] + (t - orig_start[k]) / speed[k];
  }
  void add(double orig, double fresh, double sp) {
    orig_start.push_back(orig);
    new_start.push_back(fresh);
    speed.push_back(sp);
  }
};

Trace with_times(const Trace& in, std::vector<std::pair<double, std::size_t>> times) {
  std::stable_sort(times.begin(), times.end());
  Trace out = in;
  out.requests.clear();
  out.requests.reserve(times.size());
  const double t0 = times.empty() ? 0 : times.front().first;
  for (const auto& [t, i] : times) {
    auto r = in.requests[i];
    r.arrival_s = t - t0;
    out.requests.push_back(std::move(r));
  }
  return out;
}

Trace onoff(const Trace& in, const VariantSpec& s) {
  std::mt19937_64 rng(s.seed);
  std::uniform_real_distribution<double> on(arg(s, "on_min"), arg(s, "on_max"));
  std::uniform_real_distribution<double> gap(arg(s, "gap_min"), arg(s, "gap_max"));
  std::bernoulli_distribution background(arg(s, "background"));
  // Cycle k covers original [T, T + on + gap) and new [T, T + on): the whole cycle's traffic
  // arrives during its burst.
  Warp w;
  const double end = in.duration_s() + 1;
  std::vector<std::pair<double, double>> cycles;  // (start, on)
  for (double t = 0; t < end;) {
    const double a = on(rng), b = gap(rng);
    w.add(t, t, (a + b) / a);
    cycles.emplace_back(t, a);
    t += a + b;
  }
  std::vector<std::pair<double, std::size_t>> times;
  times.reserve(in.requests.size());
  for (std::size_t i = 0; i < in.requests.size(); ++i) {
    const double t = in.requests[i].arrival_s;
    times.emplace_back(background(rng) ? t : w.map(t), i);
  }
  return with_times(in, std::move(times));
}

Trace spikes(const Trace& in, const VariantSpec& s) {
  std::mt19937_64 rng(s.seed);
  std::exponential_distribution<double> next(1.0 / arg(s, "every"));
  const double len = arg(s, "spike_s"), mult = arg(s, "mult");
  std::vector<std::pair<double, std::size_t>> times;
  for (std::size_t i = 0; i < in.requests.size(); ++i) times.emplace_back(in.requests[i].arrival_s, i);
  const auto& req = in.requests;
  for (double t = next(rng); t < in.duration_s(); t += len + next(rng)) {
    // The traffic of [t, t + mult * len) again, squeezed into [t, t + len).
    auto lo = std::lower_bound(req.begin(), req.end(), t, [](const TraceRequest& r, double v) { return r.arrival_s < v; });
    for (auto it = lo; it != req.end() && it->arrival_s < t + mult * len; ++it)
      times.emplace_back(t + (it->arrival_s - t) / mult, static_cast<std::size_t>(it - req.begin()));
  }
  return with_times(in, std::move(times));
}

Trace mmpp(const Trace& in, const VariantSpec& s) {
  std::mt19937_64 rng(s.seed);
  const double high = arg(s, "high"), low = arg(s, "low"), ratio = arg(s, "ratio");
  // Speeds with a time-weighted mean of 1 over the stationary state mix: the mean rate holds.
  const double p_high = high / (high + low);
  const double slow = 1.0 / (p_high * ratio + (1 - p_high)), fast = slow * ratio;
  Warp w;
  bool in_high = std::bernoulli_distribution(p_high)(rng);
  double orig = 0, fresh = 0;
  while (orig < in.duration_s() + 1) {
    const double sojourn = std::exponential_distribution<double>(1.0 / (in_high ? high : low))(rng);
    const double sp = in_high ? fast : slow;
    w.add(orig, fresh, sp);
    orig += sojourn * sp;
    fresh += sojourn;
    in_high = !in_high;
  }
  std::vector<std::pair<double, std::size_t>> times;
  for (std::size_t i = 0; i < in.requests.size(); ++i) times.emplace_back(w.map(in.requests[i].arrival_s), i);
  return with_times(in, std::move(times));
}

Trace wave(const Trace& in, const VariantSpec& s) {
  const double period = arg(s, "period"), amp = arg(s, "amplitude");
  std::uniform_real_distribution<double> phase(0, 2 * M_PI);
  std::mt19937_64 rng(s.seed);
  const double ph = phase(rng);
  // 10-second segments at speed 1 + amp * sin(...): a smooth rate swing.
  Warp w;
  double orig = 0, fresh = 0;
  while (orig < in.duration_s() + 1) {
    const double sp = 1 + amp * std::sin(2 * M_PI * fresh / period + ph);
    w.add(orig, fresh, sp);
    orig += 10 * sp;
    fresh += 10;
  }
  std::vector<std::pair<double, std::size_t>> times;
  for (std::size_t i = 0; i < in.requests.size(); ++i) times.emplace_back(w.map(in.requests[i].arrival_s), i);
  return with_times(in, std::move(times));
}

Trace split(const Trace& in, const VariantSpec& s) {
  const double from = arg(s, "from"), to = arg(s, "to");
  std::vector<std::pair<double, std::size_t>> times;
  for (std::size_t i = 0; i < in.requests.size(); ++i)
    if (in.requests[i].arrival_s >= from && in.requests[i].arrival_s < to) times.emplace_back(in.requests[i].arrival_s, i);
  if (times.empty()) throw std::invalid_argument("split: no requests in [" + std::to_string(from) + ", " + std::to_string(to) + ")");
  return with_times(in, std::move(times));
}

}  // namespace

VariantSpec parse_variant(const std::string& text) {
  VariantSpec s;
  const auto colon = text.find(':');
  s.kind = text.substr(0, colon);
  const auto& all = defaults();
  const auto it = all.find(s.kind);
  if (it == all.end()) throw std::invalid_argument("unknown variant '" + s.kind + "' (none, onoff, spikes, mmpp, wave, split)");
  s.args = it->second;
  if (colon == std::string::npos) return s;
  std::size_t pos = colon + 1;
  while (pos <= text.size()) {
    const auto comma = std::min(text.find(',', pos), text.size());
    const std::string part = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (part.empty()) continue;
    const auto eq = part.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("variant " + s.kind + ": expected key=value, got '" + part + "'");
    const std::string key = part.substr(0, eq);
    double v = 0;
    try {
      std::size_t used = 0;
      v = std::stod(part.substr(eq + 1), &used);
      if (used != part.size() - eq - 1) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw std::invalid_argument("variant " + s.kind + ": " + key + " is not a number");
    }
    if (key == "seed") {
      if (v < 0) throw std::invalid_argument("variant " + s.kind + ": seed must be >= 0");
      s.seed = static_cast<std::uint64_t>(v);
      continue;
    }
    if (!s.args.count(key)) throw std::invalid_argument("variant " + s.kind + ": unknown parameter '" + key + "'");
    if (!std::isfinite(v) || v < 0) throw std::invalid_argument("variant " + s.kind + ": " + key + " must be >= 0");
    s.args[key] = v;
  }
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("variant " + s.kind + ": " + what);
  };
  if (s.kind == "onoff") {
    need(arg(s, "on_min") >= 1 && arg(s, "on_max") >= arg(s, "on_min"), "need 1 <= on_min <= on_max");
    need(arg(s, "gap_max") >= arg(s, "gap_min"), "need gap_min <= gap_max");
    need(arg(s, "background") <= 1, "background is a share in [0, 1]");
  } else if (s.kind == "spikes") {
    need(arg(s, "every") >= 1 && arg(s, "spike_s") >= 1 && arg(s, "mult") >= 1, "need every, spike_s >= 1 and mult >= 1");
  } else if (s.kind == "mmpp") {
    need(arg(s, "high") >= 1 && arg(s, "low") >= 1 && arg(s, "ratio") >= 1, "need high, low >= 1 s and ratio >= 1");
  } else if (s.kind == "wave") {
    need(arg(s, "period") >= 10 && arg(s, "amplitude") < 1, "need period >= 10 s and amplitude < 1");
  } else if (s.kind == "split") {
    need(arg(s, "to") > arg(s, "from"), "need from < to");
  }
  return s;
}

std::string describe(const VariantSpec& s) {
  std::string out = s.kind;
  char sep = ':';
  for (const auto& [k, v] : s.args) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%c%s=%g", sep, k.c_str(), v);
    out += buf;
    sep = ',';
  }
  if (s.kind != "none" && s.kind != "split") out += std::string(1, sep) + "seed=" + std::to_string(s.seed);
  return out;
}

Trace make_variant(const Trace& trace, const VariantSpec& spec) {
  if (spec.kind == "none") return trace;
  if (spec.kind == "onoff") return onoff(trace, spec);
  if (spec.kind == "spikes") return spikes(trace, spec);
  if (spec.kind == "mmpp") return mmpp(trace, spec);
  if (spec.kind == "wave") return wave(trace, spec);
  if (spec.kind == "split") return split(trace, spec);
  throw std::invalid_argument("unknown variant '" + spec.kind + "'");
}

Trace repeat_trace(const Trace& trace, int times) {
  if (times < 1 || times > 1000) throw std::invalid_argument("repeat must be in [1, 1000], got " + std::to_string(times));
  if (times == 1 || trace.requests.empty()) return trace;
  const std::size_t n = trace.requests.size();
  const double period = trace.duration_s() + (n > 1 ? trace.duration_s() / static_cast<double>(n - 1) : 1.0);
  Trace out = trace;
  out.requests.reserve(n * static_cast<std::size_t>(times));
  for (int k = 1; k < times; ++k)
    for (std::size_t i = 0; i < n; ++i) {
      TraceRequest r = trace.requests[i];
      r.arrival_s += period * k;
      out.requests.push_back(std::move(r));
    }
  out.requests_with_blocks = trace.requests_with_blocks * static_cast<std::size_t>(times);
  out.zero_output_rows = trace.zero_output_rows * static_cast<std::size_t>(times);
  return out;
}

}  // namespace tidegate::replay
