#pragma once
// Burstier traces made from a real one, for robustness tests: the requests (prompt and output
// lengths, prefix blocks, order) are the trace's own; only their arrival times move, by a
// piecewise-constant time warp, so a variant keeps the trace's length mix and mean rate.
//
//   onoff   bursts of on_min..on_max seconds separated by gaps of gap_min..gap_max: each
//           cycle's traffic is squeezed into its burst; a `background` share of requests keeps
//           its original time, so gaps are quiet, not empty. (The bursty trace of issue 16:
//           bursts of 1-2 minutes, 10-minute gaps.)
//   spikes  the trace as it is, plus spikes: every ~`spike_every` seconds (exponential) the
//           traffic of `mult` x spike_s seconds is replayed, compressed, into spike_s seconds on
//           top (those requests are copies, so the variant has more requests than the trace).
//   mmpp    a two-state Markov-modulated rate: sojourns exponential with means high_s and low_s,
//           the high state `ratio` times faster than the low one, mean rate preserved.
//   wave    a slow sinusoidal rate: period_s, relative amplitude `amplitude` (< 1).
//   split   a time range [from, to) of the trace (re-based to 0): the tuner's held-back part.
// Every variant is deterministic in its seed.
#include <cstdint>
#include <map>
#include <string>

#include "tidegate/replay/trace.h"

namespace tidegate::replay {

struct VariantSpec {
  std::string kind = "none";           // none, onoff, spikes, mmpp, wave, split
  std::map<std::string, double> args;  // kind-specific, with defaults below
  std::uint64_t seed = 1;
};

// "onoff", "onoff:on_min=60,on_max=120,gap_min=480,gap_max=720,background=0.05,seed=3",
// "spikes:every=600,mult=5", "mmpp:high=120,low=480,ratio=6", "wave:period=1800,amplitude=0.6",
// "split:from=0,to=1800". Throws std::invalid_argument naming the bad part.
VariantSpec parse_variant(const std::string& text);
std::string describe(const VariantSpec& spec);  // the spec with every default filled in

// The variant of `trace` (which is not changed). Requests stay sorted, the first at 0.
Trace make_variant(const Trace& trace, const VariantSpec& spec);

// `trace` played `times` times end to end, each copy one mean gap after the last request of
// the one before (prefix blocks repeat too): traffic longer than a policy's memories (an hour's
// burst memory, the SLO window), to see what it does once its starting fleet is no longer held.
// `times` in [1, 1000]; std::invalid_argument otherwise.
Trace repeat_trace(const Trace& trace, int times);

}  // namespace tidegate::replay
