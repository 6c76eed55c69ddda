#include "trace_rows.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace tidegate::replay::detail {
namespace {

constexpr double kMaxTimestampS = 1e15;

// A prompt beyond this is not a real request; it is a corrupt row (largest context windows
// today are ~10M tokens).
constexpr std::int64_t kMaxTokens = 10'000'000;
constexpr std::size_t kKeptBadRows = 100;

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::string seconds(double s) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

}  // namespace

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool parse_int(std::string_view s, std::int64_t& out) {
  s = trim(s);
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool parse_number(std::string_view s, double& out) {
  s = trim(s);
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(out);
}

std::vector<std::string_view> split_csv(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (true) {
    const auto comma = line.find(',', pos);
    out.push_back(trim(line.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos)));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

Collector::Collector(std::string name, const ParseOptions& options, TraceFormat format)
    : name_(std::move(name)), opt_(options) {
  trace_.format = format;
}

void Collector::bad(std::size_t line, const std::string& reason) {
  if (opt_.on_bad_row == BadRowPolicy::kFail) throw TraceError(name_, line, reason);
  if (trace_.bad_rows.size() < kKeptBadRows) trace_.bad_rows.push_back({line, reason});
  ++trace_.bad_row_count;
}

void Collector::add(std::size_t line, Row row) {
  // Bounded, not only finite: the arrival is (t - t0) / load_factor, and two timestamps near
  // +-1.7e308 made that infinite (the fuzzer's K4). 1e15 s is some thirty million years.
  if (!std::isfinite(row.t) || std::fabs(row.t) > kMaxTimestampS) return bad(line, "timestamp is not finite or out of range");
  if (row.prompt < 0 || row.output < 0) return bad(line, "token counts must not be negative");
  if (row.prompt > kMaxTokens || row.output > kMaxTokens)
    return bad(line, "token count above " + std::to_string(kMaxTokens) + " (corrupt row?)");
  if (!rows_.empty() && row.t < rows_.back().first.t) {
    if (opt_.on_unsorted == UnsortedPolicy::kFail)
      throw TraceError(name_, line, "timestamp earlier than the previous row (trace is not sorted)");
    if (trace_.out_of_order_rows++ == 0) trace_.first_out_of_order_line = line;
  }
  chain_blocks(line, row);
  rows_.push_back({std::move(row), line});
}

Trace Collector::finish() {
  if (rows_.empty()) {
    std::string why = trace_.bad_row_count ? "no valid requests (" + std::to_string(trace_.bad_row_count) + " bad rows skipped)"
                                           : "trace is empty (no requests)";
    if (trace_.other_model_rows)
      why = "no requests of model '" + opt_.model + "' (" + std::to_string(trace_.other_model_rows) +
            " rows of other models)";
    throw TraceError(name_, 0, why);
  }
  std::stable_sort(rows_.begin(), rows_.end(), [](const auto& a, const auto& b) { return a.first.t < b.first.t; });
  // The window is of the trace's own time from its first request, before the load factor: the
  // same slice of traffic at any rate. Its requests are rebased to the first of them.
  const double t0 = rows_.front().first.t;
  const double span = rows_.back().first.t - t0;
  auto inside = [&](double t) { return t - t0 >= opt_.window_from_s && t - t0 < opt_.window_to_s; };
  const auto first = std::find_if(rows_.begin(), rows_.end(), [&](const auto& r) { return inside(r.first.t); });
  if (first == rows_.end())
    throw TraceError(name_, 0,
                     "no requests in the window [" + seconds(opt_.window_from_s) + ", " + seconds(opt_.window_to_s) +
                         ") s; the trace's requests span " + seconds(span) + " s from its first");
  const double t1 = first->first.t;
  trace_.requests.reserve(rows_.size());
  // The prefix counters are of the requests replayed; the chain check was of the whole file.
  for (auto& [row, line] : rows_) {
    if (!inside(row.t)) {
      ++trace_.outside_window_rows;
      continue;
    }
    if (row.has_ids) ++trace_.requests_with_blocks;
    if (row.ids_miscounted) ++trace_.block_count_mismatch_rows;
    TraceRequest r;
    r.arrival_s = (row.t - t1) / opt_.load_factor;
    r.prompt_tokens = std::max<std::int64_t>(row.prompt, 1);
    if (row.output == 0) ++trace_.zero_output_rows;
    r.output_tokens = static_cast<std::int32_t>(std::max<std::int64_t>(row.output, 1));
    r.blocks = std::move(row.ids);
    trace_.requests.push_back(std::move(r));
  }
  if (trace_.requests_with_blocks > 0) trace_.block_tokens = opt_.block_tokens;
  return std::move(trace_);
}

// Replaces raw ids by chained hashes (block i's hash covers blocks 0..i), in file order, and
// checks that the ids form prefix chains: an id must always follow the same prefix.
void Collector::chain_blocks(std::size_t line, Row& row) {
  if (!row.has_ids) return;
  const std::int64_t b = opt_.block_tokens;
  row.ids_miscounted = static_cast<std::int64_t>(row.ids.size()) != (row.prompt + b - 1) / b;
  std::uint64_t chain = 0x6d6f6f6e63616b65ULL;
  for (auto& id : row.ids) {
    const auto [it, fresh] = parent_of_.try_emplace(id, chain);
    if (!fresh && it->second != chain && trace_.non_chain_block_ids++ == 0) trace_.first_non_chain_line = line;
    chain = mix64(chain ^ mix64(id));
    id = chain;
  }
}

}  // namespace tidegate::replay::detail
