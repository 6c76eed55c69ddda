// The CSV traces: Azure's LLM inference traces (2023 and 2024 releases) and BurstGPT.
#include <string_view>

#include "trace_rows.h"

namespace tidegate::replay {
namespace {

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

// A CSV header's columns by name: any order, extra columns ignored.
int column(const std::vector<std::string_view>& header, std::string_view name) {
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  return -1;
}

}  // namespace

double parse_azure_timestamp(const std::string& text) {
  const std::string_view s = detail::trim(text);
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

namespace detail {
namespace {

// The records of a CSV trace: `header(line, fields)` for the first non-empty line (it throws a
// TraceError naming what is missing), then `row(line, fields)` for each later one with as many
// fields as the header; a row with another count is a bad row. An input without a header is
// an empty trace.
template <typename Header, typename Record>
void for_each_record(std::string_view text, const std::string& name, Collector& c, Header&& header, Record&& row) {
  std::size_t ncols = 0;
  for_each_line(text, [&](std::size_t line, std::string_view s) {
    if (s.empty()) return;
    const auto f = split_csv(s);
    if (ncols == 0) {
      header(line, f);
      ncols = f.size();
    } else if (f.size() != ncols) {
      c.bad(line, "expected " + std::to_string(ncols) + " fields, got " + std::to_string(f.size()));
    } else {
      row(line, f);
    }
  });
  if (ncols == 0) throw TraceError(name, 0, "trace is empty (no header, no requests)");
}

}  // namespace

Trace parse_azure(std::string_view text, const std::string& name, const ParseOptions& opt) {
  if (!opt.model.empty())
    throw TraceError(name, 0, "the Azure trace has no model column to pick model '" + opt.model + "' from");
  Collector c(name, opt, TraceFormat::kAzure);
  int col_t = -1, col_in = -1, col_out = -1;
  auto header = [&](std::size_t line, const std::vector<std::string_view>& f) {
    col_t = column(f, "TIMESTAMP"), col_in = column(f, "ContextTokens"), col_out = column(f, "GeneratedTokens");
    if (col_t < 0 || col_in < 0 || col_out < 0)
      throw TraceError(name, line, "Azure CSV header must name TIMESTAMP, ContextTokens and GeneratedTokens");
  };
  for_each_record(text, name, c, header, [&](std::size_t line, const std::vector<std::string_view>& f) {
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
  return c.finish();
}

// BurstGPT (Wang et al., 2024): `Timestamp` in seconds from the trace's start, `Model`
// (ChatGPT or GPT-4), `Request tokens`, `Response tokens`, `Total tokens`, `Log Type`. A
// failed request has 0 response tokens: it still arrived and was prefilled, so it is replayed
// (as one output token, counted like any zero-output row).
Trace parse_burstgpt(std::string_view text, const std::string& name, const ParseOptions& opt) {
  Collector c(name, opt, TraceFormat::kBurstGpt);
  int col_t = -1, col_in = -1, col_out = -1, col_model = -1;
  auto header = [&](std::size_t line, const std::vector<std::string_view>& f) {
    col_t = column(f, "Timestamp"), col_in = column(f, "Request tokens"), col_out = column(f, "Response tokens");
    col_model = column(f, "Model");
    if (col_t < 0 || col_in < 0 || col_out < 0)
      throw TraceError(name, line, "BurstGPT CSV header must name Timestamp, Request tokens and Response tokens");
    if (!opt.model.empty() && col_model < 0)
      throw TraceError(name, line, "the header has no Model column to pick model '" + opt.model + "' from");
  };
  for_each_record(text, name, c, header, [&](std::size_t line, const std::vector<std::string_view>& f) {
    if (!opt.model.empty() && f[col_model] != opt.model) return c.other_model();
    Row row;
    if (!parse_number(f[col_t], row.t)) return c.bad(line, "Timestamp is not a number of seconds");
    if (!parse_int(f[col_in], row.prompt)) return c.bad(line, "Request tokens is not an integer");
    if (!parse_int(f[col_out], row.output)) return c.bad(line, "Response tokens is not an integer");
    c.add(line, row);
  });
  return c.finish();
}

}  // namespace detail
}  // namespace tidegate::replay
