#pragma once
// What the trace readers share: a row as read, the collector that checks, chains, windows and
// sorts the rows into a Trace, and the line and CSV helpers. Private to the replay library.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tidegate/replay/trace.h"

namespace tidegate::replay::detail {

std::string_view trim(std::string_view s);
bool parse_int(std::string_view s, std::int64_t& out);
bool parse_number(std::string_view s, double& out);  // finite decimal or exponent notation
std::vector<std::string_view> split_csv(std::string_view line);

template <typename Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  std::size_t line = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    ++line;
    fn(line, trim(text.substr(pos, end - pos)));
    pos = end + 1;
  }
}

struct Row {
  double t = 0;  // seconds, in the trace's own clock
  std::int64_t prompt = 0;
  std::int64_t output = 0;
  std::vector<std::uint64_t> ids;  // raw block ids (Mooncake hash_ids), in prompt order
  bool has_ids = false;
  bool ids_miscounted = false;  // the ids do not cover ceil(prompt / block_tokens) blocks
};

class Collector final {
 public:
  Collector(std::string name, const ParseOptions& options, TraceFormat format);

  // A malformed row: counted and skipped, or a TraceError under BadRowPolicy::kFail.
  void bad(std::size_t line, const std::string& reason);
  // A well-formed row of another model than ParseOptions::model: not replayed, counted.
  void other_model() { ++trace_.other_model_rows; }
  void add(std::size_t line, Row row);
  // Sorted, cut to the window, rebased to its first request, scaled by the load factor.
  Trace finish();

 private:
  void chain_blocks(std::size_t line, Row& row);

  std::unordered_map<std::uint64_t, std::uint64_t> parent_of_;  // raw id -> chain before it
  std::string name_;
  ParseOptions opt_;
  Trace trace_;
  std::vector<std::pair<Row, std::size_t>> rows_;
};

// The readers, one per format; parse_trace_text picks one.
Trace parse_azure(std::string_view text, const std::string& name, const ParseOptions& opt);
Trace parse_burstgpt(std::string_view text, const std::string& name, const ParseOptions& opt);
Trace parse_mooncake(std::string_view text, const std::string& name, const ParseOptions& opt);

}  // namespace tidegate::replay::detail
