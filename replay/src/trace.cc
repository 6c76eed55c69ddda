#include "tidegate/replay/trace.h"

#include <boost/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string_view>

#include "trace_rows.h"

namespace tidegate::replay {
namespace {

using detail::Collector;
using detail::Row;
using detail::trim;

bool json_number(const boost::json::object& o, const char* key, double& out) {
  const auto* v = o.if_contains(key);
  if (!v) return false;
  if (v->is_int64()) out = static_cast<double>(v->as_int64());
  else if (v->is_uint64()) out = static_cast<double>(v->as_uint64());
  else if (v->is_double()) out = v->as_double();
  else return false;
  return true;
}

}  // namespace

namespace detail {

Trace parse_mooncake(std::string_view text, const std::string& name, const ParseOptions& opt) {
  if (!opt.model.empty())
    throw TraceError(name, 0, "the Mooncake trace has no model field to pick model '" + opt.model + "' from");
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

}  // namespace detail

namespace {

std::string describe(const std::string& file, std::size_t line, const std::string& message) {
  std::ostringstream o;
  o << "trace " << file;
  if (line) o << ":" << line;
  o << ": " << message;
  return o.str();
}

// A spreadsheet's UTF-8 byte order mark would hide the header's first column name.
std::string_view without_bom(const std::string& text) {
  static constexpr std::string_view kBom = "\xEF\xBB\xBF";
  const std::string_view s(text);
  return s.substr(0, kBom.size()) == kBom ? s.substr(kBom.size()) : s;
}

}  // namespace

TraceError::TraceError(std::string file, std::size_t line, const std::string& message)
    : std::runtime_error(describe(file, line, message)), line_(line) {}

TraceFormat detect_format(const std::string& raw) {
  const std::string_view text = without_bom(raw);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const auto line = trim(text.substr(pos, end - pos));
    if (!line.empty()) {
      if (line.front() == '{') return TraceFormat::kMooncake;
      if (line.find("Request tokens") != std::string_view::npos) return TraceFormat::kBurstGpt;
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
    case TraceFormat::kBurstGpt: return "burstgpt";
    case TraceFormat::kAuto: return "auto";
  }
  return "auto";
}

TraceFormat trace_format_from_string(const std::string& text) {
  if (text == "azure") return TraceFormat::kAzure;
  if (text == "mooncake") return TraceFormat::kMooncake;
  if (text == "burstgpt") return TraceFormat::kBurstGpt;
  if (text == "auto") return TraceFormat::kAuto;
  throw std::invalid_argument("unknown trace format '" + text + "' (azure, burstgpt, mooncake or auto)");
}

Trace parse_trace_text(const std::string& raw, const std::string& name, const ParseOptions& options) {
  if (!(options.load_factor > 0) || options.load_factor > 1000)
    throw std::invalid_argument("load factor must be in (0, 1000], got " + std::to_string(options.load_factor));
  if (!(options.window_from_s >= 0) || !(options.window_to_s > options.window_from_s))
    throw std::invalid_argument("trace window must be [from, to) with 0 <= from < to, got [" +
                                std::to_string(options.window_from_s) + ", " + std::to_string(options.window_to_s) + ")");
  const std::string_view text = without_bom(raw);
  TraceFormat format = options.format;
  if (format == TraceFormat::kAuto) {
    format = detect_format(raw);
    if (format == TraceFormat::kAuto) {
      if (trim(text).empty()) throw TraceError(name, 0, "trace is empty (no requests)");
      throw TraceError(name, 1,
                       "cannot detect the format: expected an Azure CSV header (TIMESTAMP,ContextTokens,"
                       "GeneratedTokens), a BurstGPT CSV header (Timestamp,...,Request tokens,Response tokens) "
                       "or Mooncake JSON lines; pass --format");
    }
  }
  switch (format) {
    case TraceFormat::kAzure: return detail::parse_azure(text, name, options);
    case TraceFormat::kBurstGpt: return detail::parse_burstgpt(text, name, options);
    default: return detail::parse_mooncake(text, name, options);
  }
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
