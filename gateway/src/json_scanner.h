#pragma once
// A validating JSON walker that builds nothing: it accepts exactly what boost::json::parse
// accepts with its default options (strict grammar, valid UTF-8, 32 levels of nesting) and
// lets the caller decode only the members it needs, skipping the rest in place. The chunk
// scan (chunk_scan.h) and the request scan (request_scan.h) are written on it.
#include <cstdint>
#include <string>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tidegate::gateway {

// A JSON string value as it sits in the text (between the quotes, escapes not decoded).
struct JsonString {
  std::string_view raw;
  bool escaped = false;
  bool present = false;  // the key was there with a string value
  void append_to(std::string& out) const;
};

// A number as boost::json would store it: an integer literal that fits int64 is kInt, a
// non-negative one that fits only uint64 is kUint, anything else is kDouble.
struct JsonNumber {
  enum class Kind { kInt, kUint, kDouble } kind = Kind::kInt;
  std::int64_t i = 0;
  std::uint64_t u = 0;
  double d = 0;
};

namespace json_scan {

constexpr int kMaxDepth = 32;

// Decodes the escapes of a string the scanner validated.
void decode(std::string_view raw, std::string& out);
// Length of the well-formed UTF-8 sequence at s[i] (a byte >= 0x80), or 0.
std::size_t utf8_sequence(std::string_view s, std::size_t i);
int hex4(std::string_view s, std::size_t i);  // -1 if not four hex digits
// Where a string's run of plain bytes ends at or after i: the first '"', '\\', control byte or,
// with `stop_non_ascii`, byte >= 0x80; s.size() if none. Sixteen bytes per step: a completion's
// text, or a prompt, is most of a body's bytes. Inline: it runs once per string.
inline std::size_t plain_run_end(std::string_view s, std::size_t i, bool stop_non_ascii) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i max_control = _mm_set1_epi8(0x1f);
  for (; i + 16 <= s.size(); i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(v, max_control), v);  // unsigned v <= 0x1f
    const __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)), control);
    int mask = _mm_movemask_epi8(stop);
    if (stop_non_ascii) mask |= _mm_movemask_epi8(v);  // the high bit: bytes >= 0x80
    if (mask) return i + static_cast<std::size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
#endif
  for (; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\' || c < 0x20 || (stop_non_ascii && c >= 0x80)) return i;
  }
  return i;
}

// Classifies and converts a number the scanner delimited (1e400 is infinity, as for boost::json).
void to_number(std::string_view text, bool plain_integer, JsonNumber& out);

}  // namespace json_scan

class JsonScanner {
 public:
  // `validate_utf8` checks every non-ASCII byte of strings (boost::json does): needed where the
  // scan decides whether a client's body is valid JSON; a replica's output is trusted for it.
  explicit JsonScanner(std::string_view s, bool validate_utf8 = false) : s_(s), utf8_(validate_utf8) {}

  std::size_t position() const { return p_; }
  bool at_end() {
    ws();
    return p_ == s_.size();
  }
  char peek() {
    ws();
    return p_ < s_.size() ? s_[p_] : '\0';
  }
  bool eat(char c) {
    if (peek() != c) return false;
    ++p_;
    return true;
  }

  bool string(JsonString& out) {
    if (!eat('"')) return false;
    const auto begin = p_;
    bool escaped = false;
    while ((p_ = json_scan::plain_run_end(s_, p_, utf8_)) < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[p_]);
      if (c == '"') {
        out.raw = s_.substr(begin, p_ - begin);
        out.escaped = escaped;
        out.present = true;
        ++p_;
        return true;
      }
      if (c < 0x20) return false;
      if (c >= 0x80) {
        const auto n = json_scan::utf8_sequence(s_, p_);
        if (n == 0) return false;
        p_ += n;
        continue;
      }
      escaped = true;  // c is a backslash
      if (++p_ >= s_.size()) return false;
      const char e = s_[p_];
      if (e == 'u') {
        const int cp = json_scan::hex4(s_, p_ + 1);
        if (cp < 0 || (cp >= 0xDC00 && cp < 0xE000)) return false;
        p_ += 5;
        if (cp >= 0xD800 && cp < 0xDC00) {  // a high surrogate needs its low half
          if (p_ + 1 >= s_.size() || s_[p_] != '\\' || s_[p_ + 1] != 'u') return false;
          const int lo = json_scan::hex4(s_, p_ + 2);
          if (lo < 0xDC00 || lo >= 0xE000) return false;
          p_ += 6;
        }
        continue;
      }
      if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't') return false;
      ++p_;
    }
    return false;
  }

  // JSON number grammar; `out` (if any) gets the value as boost::json would store it.
  bool number(JsonNumber* out) {
    ws();
    const auto begin = p_;
    auto digits = [&] {
      const auto d = p_;
      while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9') ++p_;
      return p_ - d;
    };
    if (p_ < s_.size() && s_[p_] == '-') ++p_;
    const auto int_begin = p_;
    const auto n = digits();
    if (n == 0 || (n > 1 && s_[int_begin] == '0')) return false;
    bool plain = true;
    if (p_ < s_.size() && s_[p_] == '.') {
      ++p_;
      if (digits() == 0) return false;
      plain = false;
    }
    if (p_ < s_.size() && (s_[p_] == 'e' || s_[p_] == 'E')) {
      ++p_;
      if (p_ < s_.size() && (s_[p_] == '+' || s_[p_] == '-')) ++p_;
      const auto exp_begin = p_;
      if (digits() == 0) return false;
      // boost::json refuses an exponent whose magnitude passes INT_MAX (exponent_overflow), so
      // such a body must not pass the scan either (the fuzzer's K5; boost also counts the
      // mantissa's excess digits, which this does not, fuzz/README.md).
      std::int64_t e = 0;
      for (auto i = exp_begin; i < p_; ++i)
        if ((e = e * 10 + (s_[i] - '0')) > 2147483647) return false;
      plain = false;
    }
    if (out) json_scan::to_number(s_.substr(begin, p_ - begin), plain, *out);
    return true;
  }

  bool literal(std::string_view word) {
    if (s_.substr(p_, word.size()) != word) return false;
    p_ += word.size();
    return true;
  }

  // Consumes one value of any kind; `depth` is the nesting level it sits at.
  bool skip(int depth) {
    switch (peek()) {
      case '"': {
        JsonString ignored;
        return string(ignored);
      }
      case '{': return object(depth + 1, [&](const JsonString&) { return skip(depth + 1); });
      case '[': return array(depth + 1, [&] { return skip(depth + 1); });
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return number(nullptr);
    }
  }

  // Calls member(key) with the scanner positioned at the value; member consumes it.
  template <class Member>
  bool object(int depth, Member&& member) {
    if (depth > json_scan::kMaxDepth || !eat('{')) return false;
    if (eat('}')) return true;
    do {
      JsonString key;
      if (!string(key) || !eat(':') || !member(key)) return false;
    } while (eat(','));
    return eat('}');
  }
  template <class Element>
  bool array(int depth, Element&& element) {
    if (depth > json_scan::kMaxDepth || !eat('[')) return false;
    if (eat(']')) return true;
    do {
      if (!element()) return false;
    } while (eat(','));
    return eat(']');
  }

  static bool key_is(const JsonString& key, std::string_view name) {
    if (!key.escaped) return key.raw == name;
    std::string k;
    json_scan::decode(key.raw, k);
    return k == name;
  }

  bool string_field(JsonString& out, int depth) {
    if (peek() == '"') return string(out);
    return skip(depth);
  }

 private:
  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' || s_[p_] == '\r')) ++p_;
  }

  std::string_view s_;
  std::size_t p_ = 0;
  bool utf8_ = false;
};

}  // namespace tidegate::gateway
