// The client request body scan (gateway/src/request_scan.cc over json_scanner.h, with UTF-8
// validation on) and what openai.cc builds on it, differentially against boost::json.
//
// Checks, for every input:
//  - scan_request accepts exactly what boost::json::parse accepts (grammar, UTF-8, 32 levels);
//  - on valid input, each member routing reads (model, messages, prompt, input, stream,
//    stream_options(.include_usage), max_tokens, max_completion_tokens, temperature, n, user)
//    has the kind boost::json gives the last occurrence of its key, the same decoded string,
//    boolean, number (kind int64/uint64/double, and value: exactly for integers, within 2 ulps
//    for doubles, see same_double), array length and all-objects flag;
//    begin/end delimit the value's bytes (they parse to the same value); object_end is the
//    closing brace;
//  - parse_request gives the same answer with and without building the DOM, for the three
//    endpoints, and when it rewrites the body to add stream_options.include_usage the result is
//    valid JSON equal to the original with that one member set, made by one edit of the text.
#include <boost/json.hpp>
#include <cmath>
#include <cstring>

#include "fuzz_util.h"
#include "openai.h"
#include "request_scan.h"

using namespace tidegate::gateway;
namespace json = boost::json;

namespace {

JsonKind kind_of(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return JsonKind::kNull;
    case json::kind::bool_: return JsonKind::kBool;
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_: return JsonKind::kNumber;
    case json::kind::string: return JsonKind::kString;
    case json::kind::array: return JsonKind::kArray;
    case json::kind::object: return JsonKind::kObject;
  }
  return JsonKind::kMissing;
}

// Boost.JSON 1.81 converts decimals with its fast, not always correctly rounded, algorithm
// (the precise mode came in 1.83); the scanner uses strtod, which rounds correctly. They may
// differ in the last bit or two (2.2250738585072011e-308: strtod gives the largest subnormal,
// Boost.JSON DBL_MIN), never more: same sign, at most 2 ulps apart, both infinite or neither.
bool same_double(double a, double b) {
  if (std::isnan(a) || std::isnan(b) || std::signbit(a) != std::signbit(b) || std::isinf(a) != std::isinf(b))
    return false;
  std::int64_t x, y;
  std::memcpy(&x, &a, 8);
  std::memcpy(&y, &b, 8);
  return (x > y ? x - y : y - x) <= 2;
}

// json::value equality, except for doubles, which are equal within same_double's 2 ulps (NaN
// equals NaN: Boost.JSON 1.81 reads 0e400 as NaN, 0 x 10^400 computed as 0 x inf). Boost.JSON's
// fast conversion of the same digits can differ in the last bit with where they sit in the
// buffer (a long mantissa at the end of a span parsed alone, against the same text inside its
// object), so two of its own readings are compared as it and strtod are.
bool same_value(const json::value& a, const json::value& b) {
  if (a.is_double() && b.is_double()) {
    if (std::isnan(a.get_double())) return std::isnan(b.get_double());
    return same_double(a.get_double(), b.get_double());
  }
  if (a.kind() != b.kind()) return false;
  if (a.is_array()) {
    const auto &x = a.get_array(), &y = b.get_array();
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!same_value(x[i], y[i])) return false;
    return true;
  }
  if (a.is_object()) {
    const auto &x = a.get_object(), &y = b.get_object();
    if (x.size() != y.size()) return false;
    for (const auto& kv : x) {
      const auto* other = y.if_contains(kv.key());
      if (!other || !same_value(kv.value(), *other)) return false;
    }
    return true;
  }
  return a == b;
}

void compare(const JsonMember& m, const json::value* v, std::string_view body, const char* key) {
  if (!v) {
    FUZZ_CHECK(m.kind == JsonKind::kMissing && m.occurrences == 0, "member found where boost::json has none", body, key);
    return;
  }
  FUZZ_CHECK(m.occurrences >= 1, "member missed", body, key);
  FUZZ_CHECK(m.kind == kind_of(*v), "member kind differs from boost::json's", body, key);
  FUZZ_CHECK(m.begin < m.end && m.end <= body.size(), "member span", body, key);
  json::error_code ec;
  const auto again = json::parse(body.substr(m.begin, m.end - m.begin), ec);
  FUZZ_CHECK(!ec && same_value(again, *v), "member span does not hold the member's value", body, key);
  switch (m.kind) {
    case JsonKind::kString: {
      std::string s;
      m.text.append_to(s);
      FUZZ_CHECK(m.text.present && s == std::string_view(v->get_string()), "decoded string differs", body, key);
      break;
    }
    case JsonKind::kBool: FUZZ_CHECK(m.boolean == v->get_bool(), "boolean differs", body, key); break;
    case JsonKind::kNumber:
      if (v->is_int64()) {
        FUZZ_CHECK(m.number.kind == JsonNumber::Kind::kInt && m.number.i == v->get_int64(), "int64 differs", body, key);
      } else if (v->is_uint64()) {
        FUZZ_CHECK(m.number.kind == JsonNumber::Kind::kUint && m.number.u == v->get_uint64(), "uint64 differs", body, key);
      } else {
        FUZZ_CHECK(m.number.kind == JsonNumber::Kind::kDouble, "number kind differs (double)", body, key);
        if (std::isnan(v->get_double())) break;  // Boost.JSON's 0e400 (same_value); strtod says 0
        FUZZ_CHECK(same_double(m.number.d, v->get_double()), "double value differs", body, key);
      }
      break;
    case JsonKind::kArray: {
      const auto& a = v->get_array();
      FUZZ_CHECK(m.size == a.size(), "array size differs", body, key);
      bool all = true;
      for (const auto& e : a) all = all && e.is_object();
      FUZZ_CHECK(m.all_objects == all, "all_objects differs", body, key);
      break;
    }
    default: break;
  }
}

bool same_error(const std::optional<ApiError>& a, const std::optional<ApiError>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->status == b->status && a->code == b->code && a->param == b->param);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  json::error_code ec;
  const json::value v = json::parse(body, ec);
  // Known issue K5: the scanner takes any exponent (1e2147483648 is infinity to strtod) where
  // Boost.JSON fails with exponent_overflow, so such a body passes the scan.
  if (ec == json::error::exponent_overflow && !fuzz::strict()) return 0;
  RequestFacts f;
  const bool ok = scan_request(body, f);
  FUZZ_CHECK(ok == !ec, "scan_request and boost::json disagree on validity", body, ec.message());
  if (ok) {
    FUZZ_CHECK(f.is_object == v.is_object(), "is_object differs", body);
    if (f.is_object) {
      const auto& o = v.get_object();
      FUZZ_CHECK(f.object_end < body.size() && body[f.object_end] == '}', "object_end is not the closing brace", body);
      for (const auto& s : kRequestFactSlots) compare(f.*(s.member), o.if_contains(s.key), body, s.key.data());
      const auto* so = o.if_contains("stream_options");
      const json::value* iu = so && so->is_object() ? so->get_object().if_contains("include_usage") : nullptr;
      if (so && so->is_object()) FUZZ_CHECK(f.stream_options.size >= so->get_object().size(), "stream_options size", body);
      compare(f.include_usage, iu, body, "stream_options.include_usage");
    }
  }

  for (const auto endpoint : {Endpoint::kChat, Endpoint::kCompletions, Endpoint::kEmbeddings}) {
    ParsedRequest with_dom, without;
    const auto e1 = parse_request(endpoint, body, with_dom, true);
    const auto e2 = parse_request(endpoint, body, without, false);
    FUZZ_CHECK(same_error(e1, e2), "parse_request differs with and without the DOM", body);
    if (!ok) FUZZ_CHECK(e1 && e1->code == "invalid_json", "invalid JSON not refused as invalid_json", body);
    if (e1) continue;
    FUZZ_CHECK(with_dom.upstream_body() == without.upstream_body(), "upstream body differs with and without the DOM", body);
    if (!with_dom.usage_injected) {
      FUZZ_CHECK(with_dom.upstream_body() == body, "body changed without usage injection", body);
      continue;
    }
    const auto up = with_dom.upstream_body();
    json::error_code uec;
    const auto rewritten = json::parse(up, uec);
    FUZZ_CHECK(!uec && rewritten.is_object(), "the rewritten body is not a JSON object", body, up);
    auto expected = v;
    auto& options = expected.get_object()["stream_options"];
    if (!options.is_object()) options = json::object();
    options.get_object()["include_usage"] = true;
    FUZZ_CHECK(same_value(rewritten, expected), "the rewritten body is not the original plus include_usage", body, up);
    // And it is one edit of the client's text (K10): the bytes before p and after q are the
    // client's, and no digit between them goes, unless it was the include_usage value replaced.
    // A re-serialisation would show here as a number written differently.
    std::size_t p = 0, q = 0;
    while (p < body.size() && p < up.size() && body[p] == up[p]) ++p;
    while (q < body.size() - p && q < up.size() - p && body[body.size() - 1 - q] == up[up.size() - 1 - q]) ++q;
    const auto removed = body.substr(p, body.size() - p - q);
    const auto& iu = f.include_usage;
    const bool in_usage_value = iu.occurrences > 0 && p >= iu.begin && body.size() - q <= iu.end;
    FUZZ_CHECK(in_usage_value || removed.find_first_of("0123456789") == std::string_view::npos,
               "the rewrite changed the client's bytes beyond one edit", body, up);
  }
  return 0;
}
