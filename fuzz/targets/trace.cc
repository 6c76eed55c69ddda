// The replay tool's trace readers (replay/src/trace*.cc): the Azure LLM inference CSV, BurstGPT's
// CSV and the Mooncake JSONL, through parse_trace_text (parse_trace_file only reads the file into it).
// Each input is parsed with the format detected and with each format forced, skipping bad rows
// and failing on them. Only TraceError may escape a parse (std::invalid_argument is reserved for
// a bad load factor, which the options here never are); any other exception aborts.
// Checks on every trace returned: requests sorted by arrival, the first at 0, arrivals finite and
// >= 0, token counts >= 1, at most 100 bad rows kept and no more than counted; a kFail parse
// that succeeds has no bad rows and equals the kSkip parse; prefix-block counters are coherent.
#include <cmath>
#include <string>

#include "fuzz_util.h"
#include "tidegate/replay/trace.h"

using namespace tidegate::replay;

namespace {

bool parse(const std::string& text, const ParseOptions& o, Trace& out) {
  try {
    out = parse_trace_text(text, "fuzz", o);
    return true;
  } catch (const TraceError&) {
    return false;
  }
}

void check(const Trace& t, const ParseOptions& o, const std::string& text) {
  FUZZ_CHECK(!t.requests.empty(), "a trace was returned with no requests", text);
  FUZZ_CHECK(t.requests.front().arrival_s == 0, "first arrival is not 0", text);
  double prev = 0;
  std::size_t with_blocks = 0;
  for (const auto& r : t.requests) {
    // K4 (fixed): +-1.7e308 timestamps with a load factor below 1 gave an infinite arrival.
    FUZZ_CHECK(std::isfinite(r.arrival_s) && r.arrival_s >= prev, "arrivals not finite and sorted", text);
    prev = r.arrival_s;
    FUZZ_CHECK(r.prompt_tokens >= 1 && r.output_tokens >= 1, "token count below 1", text);
    if (!r.blocks.empty()) ++with_blocks;
  }
  FUZZ_CHECK(t.bad_rows.size() <= 100 && t.bad_rows.size() <= t.bad_row_count, "bad row bookkeeping", text);
  FUZZ_CHECK(t.zero_output_rows <= t.requests.size(), "zero-output count", text);
  FUZZ_CHECK(with_blocks <= t.requests_with_blocks, "requests with blocks", text);
  FUZZ_CHECK(t.block_count_mismatch_rows <= t.requests_with_blocks, "block count mismatches", text);
  FUZZ_CHECK(t.block_tokens == (t.requests_with_blocks ? o.block_tokens : 0), "block_tokens", text);
  FUZZ_CHECK(t.format == TraceFormat::kAzure || t.format == TraceFormat::kMooncake || t.format == TraceFormat::kBurstGpt,
             "format", text);
  FUZZ_CHECK(t.duration_s() * o.load_factor <= o.window_to_s - o.window_from_s + 1e-6 * (1 + o.window_to_s),
             "requests beyond the window", text);
  if (o.on_bad_row == BadRowPolicy::kFail) FUZZ_CHECK(t.bad_row_count == 0, "kFail trace has bad rows", text);
}

bool same(const Trace& a, const Trace& b) {
  if (a.requests.size() != b.requests.size() || a.format != b.format || a.block_tokens != b.block_tokens ||
      a.out_of_order_rows != b.out_of_order_rows || a.non_chain_block_ids != b.non_chain_block_ids)
    return false;
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    const auto &x = a.requests[i], &y = b.requests[i];
    if (x.arrival_s != y.arrival_s || x.prompt_tokens != y.prompt_tokens || x.output_tokens != y.output_tokens ||
        x.blocks != y.blocks)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The last byte picks the load factor, block size, a window and a model, so the rest reads as
  // a trace.
  const std::uint8_t knob = size ? data[size - 1] : 0;
  ParseOptions o;
  o.load_factor = (knob & 3) == 0 ? 1.0 : (knob & 3) == 1 ? 2.5 : (knob & 3) == 2 ? 0.001 : 1000.0;
  o.block_tokens = (knob & 4) ? 16 : 512;
  if (knob & 8) o.window_from_s = 1, o.window_to_s = 100;
  if (knob & 16) o.model = "GPT-4";

  for (const auto format : {TraceFormat::kAuto, TraceFormat::kAzure, TraceFormat::kMooncake, TraceFormat::kBurstGpt}) {
    o.format = format;
    o.on_bad_row = BadRowPolicy::kSkip;
    o.on_unsorted = UnsortedPolicy::kSort;
    Trace skip;
    const bool ok = parse(text, o, skip);
    if (ok) {
      check(skip, o, text);
      if (format == TraceFormat::kAuto) FUZZ_CHECK(skip.format == detect_format(text), "detected format", text);
    }
    o.on_bad_row = BadRowPolicy::kFail;
    Trace strict;
    if (parse(text, o, strict)) {
      check(strict, o, text);
      FUZZ_CHECK(ok && skip.bad_row_count == 0 && same(skip, strict), "kFail result differs from kSkip", text);
    } else if (ok) {
      FUZZ_CHECK(skip.bad_row_count > 0, "kFail threw on a trace with no bad rows", text);
    }
    o.on_bad_row = BadRowPolicy::kSkip;
    o.on_unsorted = UnsortedPolicy::kFail;
    Trace sorted;
    if (parse(text, o, sorted)) {
      FUZZ_CHECK(ok && skip.out_of_order_rows == 0 && same(skip, sorted), "kFail on unsorted differs", text);
    } else if (ok) {
      FUZZ_CHECK(skip.out_of_order_rows > 0, "unsorted kFail threw on a sorted trace", text);
    }
  }
  try {
    (void)parse_azure_timestamp(text.substr(0, 40));
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
