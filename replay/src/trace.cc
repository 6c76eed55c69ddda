#include "tidegate/replay/trace.h"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace tidegate::replay {
namespace {

constexpr double kMaxTimestampS = 1e15;

// A prompt beyond this is not a real request; it is a corrupt row (largest context windows
// today are ~10M tokens).
constexpr std::int64_t kMaxTokens = 10'000'000;
constexpr std::size_t kKeptBadRows = 100;

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

int fixed_digits(std::string_view s, std::size_t pos, std::size_t n) {
  if (pos + n > s.size()) throw std::invalid_argument("timestamp too short");
  int v = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') throw std::invalid_argument("timestamp has a non-digit");
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

bool is_leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

std::int64_t days_since_epoch(int y, int m, int d) {
  static constexpr int kCum[12] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
  std::int64_t days = 0;
  for (int yy = 1970; yy < y; ++yy) days += is_leap(yy) ? 366 : 365;
  days += kCum[m - 1] + (m > 2 && is_leap(y) ? 1 : 0) + (d - 1);
  return days;
}

struct Row {
  double t = 0;
  std::int64_t prompt = 0;
  std::int64_t output = 0;
  std::vector<std::uint64_t> ids;  // raw block ids (Mooncake hash_ids), in prompt order
  bool has_ids = false;
};

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

class Collector {
 public:
  Collector(std::string name, const ParseOptions& options, TraceFormat format) : name_(std::move(name)), opt_(options) {
    trace_.format = format;
  }

  void bad(std::size_t line, const std::string& reason) {
    if (opt_.on_bad_row == BadRowPolicy::kFail) throw TraceError(name_, line, reason);
    if (trace_.bad_rows.size() < kKeptBadRows) trace_.bad_rows.push_back({line, reason});
    ++trace_.bad_row_count;
  }

  void add(std::size_t line, Row row) {
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

  Trace finish() {
    if (rows_.empty())
      throw TraceError(name_, 0,
                       trace_.bad_row_count ? "no valid requests (" + std::to_string(trace_.bad_row_count) +
                                                  " bad rows skipped)"
                                            : "trace is empty (no requests)");
    std::stable_sort(rows_.begin(), rows_.end(), [](const auto& a, const auto& b) { return a.first.t < b.first.t; });
    const double t0 = rows_.front().first.t;
    trace_.requests.reserve(rows_.size());
    for (const auto& [row, line] : rows_) {
      TraceRequest r;
      r.arrival_s = (row.t - t0) / opt_.load_factor;
      r.prompt_tokens = std::max<std::int64_t>(row.prompt, 1);
      if (row.output == 0) ++trace_.zero_output_rows;
      r.output_tokens = static_cast<std::int32_t>(std::max<std::int64_t>(row.output, 1));
      r.blocks = std::move(row.ids);
      trace_.requests.push_back(std::move(r));
    }
    if (trace_.requests_with_blocks > 0) trace_.block_tokens = opt_.block_tokens;
    return std::move(trace_);
  }

 private:
  // Replaces raw ids by chained hashes (block i's hash covers blocks 0..i), in file order, and
  // checks that the ids form prefix chains: an id must always follow the same prefix.
  void chain_blocks(std::size_t line, Row& row) {
    if (!row.has_ids) return;
    ++trace_.requests_with_blocks;
    const std::int64_t b = opt_.block_tokens;
    if (static_cast<std::int64_t>(row.ids.size()) != (row.prompt + b - 1) / b) ++trace_.block_count_mismatch_rows;
    std::uint64_t chain = 0x6d6f6f6e63616b65ULL;
    for (auto& id : row.ids) {
      const auto [it, fresh] = parent_of_.try_emplace(id, chain);
      if (!fresh && it->second != chain && trace_.non_chain_block_ids++ == 0) trace_.first_non_chain_line = line;
      chain = mix64(chain ^ mix64(id));
      id = chain;
    }
  }

  std::unordered_map<std::uint64_t, std::uint64_t> parent_of_;  // raw id -> chain before it
  std::string name_;
  ParseOptions opt_;
  Trace trace_;
  std::vector<std::pair<Row, std::size_t>> rows_;
};

template <typename Fn>
void for_each_line(const std::string& text, Fn&& fn) {
  std::size_t line = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++line;
    fn(line, trim(std::string_view(text).substr(pos, end - pos)));
    pos = end + 1;
  }
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

Trace parse_azure(const std::string& text, const std::string& name, const ParseOptions& opt) {
  Collector c(name, opt, TraceFormat::kAzure);
  int col_t = -1, col_in = -1, col_out = -1;
  std::size_t ncols = 0;
  for_each_line(text, [&](std::size_t line, std::string_view s) {
    if (s.empty()) return;
    auto f = split_csv(s);
    if (col_t < 0) {
      for (std::size_t i = 0; i < f.size(); ++i) {
        if (f[i] == "TIMESTAMP") col_t = static_cast<int>(i);
        if (f[i] == "ContextTokens") col_in = static_cast<int>(i);
        if (f[i] == "GeneratedTokens") col_out = static_cast<int>(i);
      }
      if (col_t < 0 || col_in < 0 || col_out < 0)
        throw TraceError(name, line, "Azure CSV header must name TIMESTAMP, ContextTokens and GeneratedTokens");
      ncols = f.size();
      return;
    }
    if (f.size() != ncols)
      return c.bad(line, "expected " + std::to_string(ncols) + " fields, got " + std::to_string(f.size()));
    Row row;
    try {
      row.t = parse_azure_timestamp(std::string(f[col_t]));
    } catch (const std::invalid_argument& e) {
      return c.bad(line, std::string("bad TIMESTAMP: ") + e.what());
    }
    if (!parse_int(f[col_in], row.prompt)) return c.bad(line, "ContextTokens is not an integer");
    if (!parse_int(f[col_out], row.output)) return c.bad(line, "GeneratedTokens is not an integer");
    c.add(line, row);
  });
  if (col_t < 0) throw TraceError(name, 0, "trace is empty (no header, no requests)");
  return c.finish();
}

bool json_number(const boost::json::object& o, const char* key, double& out) {
  const auto* v = o.if_contains(key);
  if (!v) return false;
  if (v->is_int64()) out = static_cast<double>(v->as_int64());
  else if (v->is_uint64()) out = static_cast<double>(v->as_uint64());
  else if (v->is_double()) out = v->as_double();
  else return false;
  return true;
}

Trace parse_mooncake(const std::string& text, const std::string& name, const ParseOptions& opt) {
  Collector c(name, opt, TraceFormat::kMooncake);
  for_each_line(text, [&](std::size_t line, std::string_view s) {
    if (s.empty()) return;
    boost::system::error_code ec;
    auto v = boost::json::parse(s, ec);
    if (ec || !v.is_object()) return c.bad(line, "not a JSON object");
    const auto& o = v.as_object();
    double ts = 0, in = 0, out = 0;
    if (!json_number(o, "timestamp", ts)) return c.bad(line, "missing or non-numeric \"timestamp\"");
    if (!json_number(o, "input_length", in)) return c.bad(line, "missing or non-numeric \"input_length\"");
    if (!json_number(o, "output_length", out)) return c.bad(line, "missing or non-numeric \"output_length\"");
    if (in != std::floor(in) || out != std::floor(out)) return c.bad(line, "token counts must be integers");
    if (std::fabs(in) > 1e15 || std::fabs(out) > 1e15) return c.bad(line, "token count out of range");
    Row row{ts / 1000.0, static_cast<std::int64_t>(in), static_cast<std::int64_t>(out), {}, false};
    if (const auto* ids = o.if_contains("hash_ids")) {
      if (!ids->is_array()) return c.bad(line, "\"hash_ids\" must be an array of block ids");
      row.has_ids = true;
      row.ids.reserve(ids->get_array().size());
      for (const auto& id : ids->get_array()) {
        if (id.is_uint64()) row.ids.push_back(id.get_uint64());
        else if (id.is_int64() && id.get_int64() >= 0) row.ids.push_back(static_cast<std::uint64_t>(id.get_int64()));
        else return c.bad(line, "\"hash_ids\" must hold non-negative integers");
      }
    }
    c.add(line, std::move(row));
  });
  return c.finish();
}

std::string describe(const std::string& file, std::size_t line, const std::string& message) {
  std::ostringstream o;
  o << "trace " << file;
  if (line) o << ":" << line;
  o << ": " << message;
  return o.str();
}

}  // namespace

TraceError::TraceError(std::string file, std::size_t line, const std::string& message)
    : std::runtime_error(describe(file, line, message)), line_(line) {}

double parse_azure_timestamp(const std::string& text) {
  const std::string_view s = trim(text);
  // YYYY-MM-DD HH:MM:SS[.fraction]; 'T' accepted as the separator too.
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' ||
      s[16] != ':')
    throw std::invalid_argument("expected YYYY-MM-DD HH:MM:SS[.fraction]");
  const int y = fixed_digits(s, 0, 4), mo = fixed_digits(s, 5, 2), d = fixed_digits(s, 8, 2);
  const int h = fixed_digits(s, 11, 2), mi = fixed_digits(s, 14, 2), sec = fixed_digits(s, 17, 2);
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
    throw std::invalid_argument("date or time field out of range");
  double frac = 0;
  if (s.size() > 19) {
    if (s[19] != '.' || s.size() == 20) throw std::invalid_argument("bad fractional seconds");
    double scale = 0.1;
    for (std::size_t i = 20; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') throw std::invalid_argument("bad fractional seconds");
      frac += (s[i] - '0') * scale;
      scale /= 10;
    }
  }
  return static_cast<double>(days_since_epoch(y, mo, d)) * 86400.0 + h * 3600.0 + mi * 60.0 + sec + frac;
}

TraceFormat detect_format(const std::string& text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const auto line = trim(std::string_view(text).substr(pos, end - pos));
    if (!line.empty()) {
      if (line.front() == '{') return TraceFormat::kMooncake;
      if (line.find("TIMESTAMP") != std::string_view::npos) return TraceFormat::kAzure;
      return TraceFormat::kAuto;
    }
    pos = end + 1;
  }
  return TraceFormat::kAuto;
}

std::string to_string(TraceFormat f) {
  switch (f) {
    case TraceFormat::kAzure: return "azure";
    case TraceFormat::kMooncake: return "mooncake";
    case TraceFormat::kAuto: return "auto";
  }
  return "auto";
}

TraceFormat trace_format_from_string(const std::string& text) {
  if (text == "azure") return TraceFormat::kAzure;
  if (text == "mooncake") return TraceFormat::kMooncake;
  if (text == "auto") return TraceFormat::kAuto;
  throw std::invalid_argument("unknown trace format '" + text + "' (azure, mooncake or auto)");
}

Trace parse_trace_text(const std::string& text, const std::string& name, const ParseOptions& options) {
  if (!(options.load_factor > 0) || options.load_factor > 1000)
    throw std::invalid_argument("load factor must be in (0, 1000], got " + std::to_string(options.load_factor));
  TraceFormat format = options.format;
  if (format == TraceFormat::kAuto) {
    format = detect_format(text);
    if (format == TraceFormat::kAuto) {
      if (trim(text).empty()) throw TraceError(name, 0, "trace is empty (no requests)");
      throw TraceError(name, 1,
                       "cannot detect the format: expected an Azure CSV header (TIMESTAMP,ContextTokens,"
                       "GeneratedTokens) or Mooncake JSON lines; pass --format");
    }
  }
  return format == TraceFormat::kAzure ? parse_azure(text, name, options) : parse_mooncake(text, name, options);
}

Trace parse_trace_file(const std::string& path, const ParseOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TraceError(path, 0, "cannot open file");
  std::ostringstream buf;
  buf << in.rdbuf();
  return parse_trace_text(buf.str(), path, options);
}

std::int64_t InfinitePrefixCache::admit(const TraceRequest& req) {
  const std::int64_t b = block_tokens_;
  std::int64_t matched = 0;
  for (std::size_t i = 0; b > 0 && i < req.blocks.size() && seen_.count(req.blocks[i]); ++i)
    matched += std::min<std::int64_t>(b, req.prompt_tokens - static_cast<std::int64_t>(i) * b);
  seen_.insert(req.blocks.begin(), req.blocks.end());
  return std::max<std::int64_t>(matched, 0);
}

double ideal_prefix_hit_rate(const Trace& trace) {
  if (trace.block_tokens <= 0) return 0;
  InfinitePrefixCache cache(trace.block_tokens);
  double queried = 0, hits = 0;
  for (const auto& r : trace.requests) {
    queried += static_cast<double>(r.prompt_tokens);
    // As the engines count hits: the last prompt token is always computed.
    hits += static_cast<double>(std::min<std::int64_t>(cache.admit(r), std::max<std::int64_t>(0, r.prompt_tokens - 1)));
  }
  return queried > 0 ? hits / queried : 0;
}

}  // namespace tidegate::replay
