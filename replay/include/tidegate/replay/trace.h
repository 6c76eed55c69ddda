#pragma once
// Request traces for replay: the Azure LLM inference trace CSV, BurstGPT's CSV and the Mooncake
// JSONL.
// Parsing is strict by default about what a row means and explicit about what it does with
// bad input, because a silently dropped row changes the load a policy is judged on.
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

namespace tidegate::replay {

enum class TraceFormat { kAuto, kAzure, kMooncake, kBurstGpt };
enum class BadRowPolicy { kSkip, kFail };
enum class UnsortedPolicy { kSort, kFail };

struct TraceRequest {
  double arrival_s = 0;            // seconds since the first request of the trace
  std::int64_t prompt_tokens = 0;  // >= 1
  std::int32_t output_tokens = 0;  // >= 1
  // Chained hashes of the prompt's KV blocks (Trace::block_tokens each; the last may be
  // partial): equal hash = equal prefix through that block. Empty: nothing is reusable.
  std::vector<std::uint64_t> blocks;
};

struct BadRow {
  std::size_t line = 0;  // 1-based line in the file
  std::string reason;
};

struct Trace {
  TraceFormat format = TraceFormat::kAuto;  // the format actually parsed
  std::vector<TraceRequest> requests;       // sorted by arrival_s, first at 0
  std::vector<BadRow> bad_rows;             // skipped rows (first 100 kept; count in bad_row_count)
  std::size_t bad_row_count = 0;
  std::size_t out_of_order_rows = 0;        // rows earlier than their predecessor (sorted anyway)
  std::size_t first_out_of_order_line = 0;
  std::size_t zero_output_rows = 0;         // output 0 counted as 1: a request still gets a token
  std::size_t outside_window_rows = 0;      // valid rows outside ParseOptions' window: not replayed
  std::size_t other_model_rows = 0;         // valid rows of another model than ParseOptions::model
  // Prefix blocks (Mooncake `hash_ids`): 0 when the requests replayed carry none (prefix
  // caching off). The counts are of the requests replayed (inside the window, of the model).
  std::int32_t block_tokens = 0;
  std::size_t requests_with_blocks = 0;
  // Block ids that also appear after a different prefix or at another position: not a prefix
  // chain. Reuse is only counted for identical prefixes (the chained hash), so these never hit.
  // Checked over the whole file, in file order.
  std::size_t non_chain_block_ids = 0;
  std::size_t first_non_chain_line = 0;
  // Rows whose ids do not cover ceil(input_length / block_tokens) blocks (fewer: the rest of
  // the prompt is unique; more: the extra ids are ignored).
  std::size_t block_count_mismatch_rows = 0;
  double duration_s() const { return requests.empty() ? 0 : requests.back().arrival_s; }
};

struct ParseOptions {
  TraceFormat format = TraceFormat::kAuto;
  BadRowPolicy on_bad_row = BadRowPolicy::kSkip;
  UnsortedPolicy on_unsorted = UnsortedPolicy::kSort;
  // Arrival rate multiplier: 2.0 compresses time by 2 (same requests, twice the rate).
  double load_factor = 1.0;
  // Tokens per `hash_ids` block in Mooncake traces (512 in the FAST'25 release).
  std::int32_t block_tokens = 512;
  // Only the requests within [window_from_s, window_to_s) of the trace's own time, counted from
  // its first request and before the load factor, rebased so the first of them is at 0: an
  // hour out of a trace of weeks (BurstGPT spans months). std::invalid_argument unless
  // 0 <= from < to; a TraceError when no request falls inside.
  double window_from_s = 0;
  double window_to_s = std::numeric_limits<double>::infinity();
  // Only the rows of this model (BurstGPT's `Model` column: ChatGPT, GPT-4); empty: every row.
  // A TraceError for a format without a model column.
  std::string model;
};

// Thrown for unreadable files, unknown formats, empty traces (or windows, or models), and bad
// rows under kFail.
class TraceError final : public std::runtime_error {
 public:
  TraceError(std::string file, std::size_t line, const std::string& message);
  std::size_t line() const { return line_; }

 private:
  std::size_t line_;
};

Trace parse_trace_file(const std::string& path, const ParseOptions& options);

// Prefix-cache hit rate (prompt tokens not prefilled / prompt tokens) if the whole fleet shared
// one infinite cache: each request's leading blocks seen in any earlier request, counted as the
// engines count them (the last prompt token is always computed). The ceiling no routing can
// pass; 0 when the trace carries no block ids.
double ideal_prefix_hit_rate(const Trace& trace);

// One infinite prefix cache shared by a whole fleet: what ideal_prefix_hit_rate() replays over
// the trace, and what the replay's `ideal` balancer consults at each dispatch.
class InfinitePrefixCache final {
 public:
  explicit InfinitePrefixCache(std::int32_t block_tokens) : block_tokens_(block_tokens) {}
  // Tokens of `req`'s prompt held because an earlier request had them (its leading blocks
  // seen before); then remembers all of its blocks.
  std::int64_t admit(const TraceRequest& req);

 private:
  std::int32_t block_tokens_;
  std::unordered_set<std::uint64_t> seen_;
};
// Same, from text already in memory; `name` is used in messages.
Trace parse_trace_text(const std::string& text, const std::string& name, const ParseOptions& options);

TraceFormat detect_format(const std::string& text);
std::string to_string(TraceFormat format);
TraceFormat trace_format_from_string(const std::string& text);  // throws std::invalid_argument

// "2023-11-16 18:15:46.6805900" -> seconds since 1970-01-01 UTC; throws std::invalid_argument.
double parse_azure_timestamp(const std::string& text);

}  // namespace tidegate::replay
