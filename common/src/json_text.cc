#include "tidegate/common/json_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace tidegate::common {
namespace {

// Fixed notation of a finite double is at most 309 integer digits, or "0." and up to 340
// fractional ones for the smallest subnormals; with a requested precision, 309 + 1 + precision.
constexpr std::size_t kBuf = 400;

void trim_fraction(std::string& s) {
  const auto dot = s.find('.');
  if (dot == std::string::npos) return;
  const auto last = s.find_last_not_of('0');
  s.erase(last == dot ? dot : last + 1);
}

}  // namespace

std::string format_decimal(double v, int max_decimals) {
  if (!std::isfinite(v)) return "null";
  max_decimals = std::clamp(max_decimals, 0, 60);
  char buf[kBuf];
  auto r = std::to_chars(buf, buf + kBuf, v, std::chars_format::fixed);  // shortest round trip
  std::string s = r.ec == std::errc() ? std::string(buf, r.ptr) : std::string();
  const auto dot = s.find('.');
  if (s.empty() || (dot != std::string::npos && s.size() - dot - 1 > static_cast<std::size_t>(max_decimals))) {
    r = std::to_chars(buf, buf + kBuf, v, std::chars_format::fixed, max_decimals);
    s = r.ec == std::errc() ? std::string(buf, r.ptr) : std::string("null");
    trim_fraction(s);
  }
  if (s == "-0") s = "0";  // -0.0, or a tiny negative rounded away
  return s;
}

void append_json_text(std::string& out, const boost::json::value& v, int max_decimals) {
  switch (v.kind()) {
    case boost::json::kind::double_:
      out += format_decimal(v.get_double(), max_decimals);
      return;
    case boost::json::kind::array: {
      out += '[';
      bool first = true;
      for (const auto& e : v.get_array()) {
        if (!first) out += ',';
        first = false;
        append_json_text(out, e, max_decimals);
      }
      out += ']';
      return;
    }
    case boost::json::kind::object: {
      out += '{';
      bool first = true;
      for (const auto& kv : v.get_object()) {
        if (!first) out += ',';
        first = false;
        out += boost::json::serialize(kv.key());
        out += ':';
        append_json_text(out, kv.value(), max_decimals);
      }
      out += '}';
      return;
    }
    default:  // strings (escaped), integers, booleans and null as boost::json writes them
      out += boost::json::serialize(v);
  }
}

std::string to_json_text(const boost::json::value& v, int max_decimals) {
  std::string out;
  append_json_text(out, v, max_decimals);
  return out;
}

}  // namespace tidegate::common
