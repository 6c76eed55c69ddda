#include "chunk_scan.h"

#include <charconv>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tidegate::gateway {
namespace {

constexpr int kMaxDepth = 32;

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The first index at or after i holding '"', '\\' or a control character, or s.size(): where
// a string's plain run ends. Sixteen bytes per step; a completion's text is most of its bytes.
std::size_t plain_run_end(std::string_view s, std::size_t i) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i max_control = _mm_set1_epi8(0x1f);
  for (; i + 16 <= s.size(); i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(v, max_control), v);  // unsigned v <= 0x1f
    const __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)), control);
    if (const int mask = _mm_movemask_epi8(stop)) return i + static_cast<std::size_t>(__builtin_ctz(mask));
  }
#endif
  for (; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\' || c < 0x20) return i;
  }
  return i;
}

int hex4(std::string_view s, std::size_t i) {  // -1 if not four hex digits
  if (i + 4 > s.size()) return -1;
  int v = 0;
  for (std::size_t k = i; k < i + 4; ++k) {
    const char c = s[k];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= c - '0';
    else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
    else return -1;
  }
  return v;
}

// Decodes the escapes of a string already validated by Scanner::string.
void decode(std::string_view raw, std::string& out) {
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    const char e = raw[++i];
    switch (e) {
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'u': {
        std::uint32_t cp = static_cast<std::uint32_t>(hex4(raw, i + 1));
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00) {  // validated: a low surrogate follows
          const auto lo = static_cast<std::uint32_t>(hex4(raw, i + 3));
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          i += 6;
        }
        append_utf8(out, cp);
        break;
      }
      default: out.push_back(e);  // '"', '\\', '/'
    }
  }
}

class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}

  bool document(ChunkFacts& f) {
    if (peek() != '{') return false;
    if (!object(1, [&](const JsonString& key) { return top_member(key, f); })) return false;
    ws();
    return p_ == s_.size();
  }

 private:
  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' || s_[p_] == '\r')) ++p_;
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
    while ((p_ = plain_run_end(s_, p_)) < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[p_]);
      if (c == '"') {
        out.raw = s_.substr(begin, p_ - begin);
        out.escaped = escaped;
        out.present = true;
        ++p_;
        return true;
      }
      if (c < 0x20) return false;
      escaped = true;  // c is a backslash
      if (++p_ >= s_.size()) return false;
      const char e = s_[p_];
      if (e == 'u') {
        const int cp = hex4(s_, p_ + 1);
        if (cp < 0 || (cp >= 0xDC00 && cp < 0xE000)) return false;
        p_ += 5;
        if (cp >= 0xD800 && cp < 0xDC00) {  // a high surrogate needs its low half
          if (p_ + 1 >= s_.size() || s_[p_] != '\\' || s_[p_ + 1] != 'u') return false;
          const int lo = hex4(s_, p_ + 2);
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

  // JSON number grammar; *integer = the int64 value when it is a plain integer in range.
  bool number(std::optional<std::int64_t>* integer) {
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
      if (digits() == 0) return false;
      plain = false;
    }
    if (integer && plain) {
      std::int64_t v = 0;
      const auto r = std::from_chars(s_.data() + begin, s_.data() + p_, v);
      if (r.ec == std::errc() && r.ptr == s_.data() + p_) *integer = v;
    }
    return true;
  }

  bool literal(std::string_view word) {
    if (s_.substr(p_, word.size()) != word) return false;
    p_ += word.size();
    return true;
  }

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
    if (depth > kMaxDepth || !eat('{')) return false;
    if (eat('}')) return true;
    do {
      JsonString key;
      if (!string(key) || !eat(':') || !member(key)) return false;
    } while (eat(','));
    return eat('}');
  }
  template <class Element>
  bool array(int depth, Element&& element) {
    if (depth > kMaxDepth || !eat('[')) return false;
    if (eat(']')) return true;
    do {
      if (!element()) return false;
    } while (eat(','));
    return eat(']');
  }

  static bool key_is(const JsonString& key, std::string_view name) {
    if (!key.escaped) return key.raw == name;
    std::string k;
    decode(key.raw, k);
    return k == name;
  }

  bool string_field(JsonString& out, int depth) {
    if (peek() == '"') return string(out);
    return skip(depth);
  }

  bool top_member(const JsonString& key, ChunkFacts& f) {
    if (key_is(key, "usage")) {
      if (peek() != '{') {
        f.usage_is_object = false;
        return skip(1);
      }
      f.usage_is_object = true;
      return object(2, [&](const JsonString& k) {
        if (key_is(k, "prompt_tokens")) return int_field(f.prompt_tokens, 2);
        if (key_is(k, "completion_tokens")) return int_field(f.completion_tokens, 2);
        return skip(2);
      });
    }
    if (key_is(key, "choices")) {
      f.has_choices = false;
      f.choice.reset();
      if (peek() != '[') return skip(1);
      return array(2, [&] {
        f.has_choices = true;
        if (peek() != '{') return skip(2);
        ChoiceFacts c;
        bool has_index = false;
        std::optional<std::int64_t> index;
        const bool ok = object(3, [&](const JsonString& k) { return choice_member(k, c, has_index, index); });
        if (ok && !f.choice && (!has_index || (index && *index == 0))) f.choice = c;
        return ok;
      });
    }
    return skip(1);
  }

  bool int_field(std::optional<std::int64_t>& out, int depth) {
    const char c = peek();
    if (c == '-' || (c >= '0' && c <= '9')) {
      std::optional<std::int64_t> v;
      if (!number(&v)) return false;
      out = v;
      return true;
    }
    out.reset();
    return skip(depth);
  }

  bool choice_member(const JsonString& k, ChoiceFacts& c, bool& has_index, std::optional<std::int64_t>& index) {
    if (key_is(k, "index")) {
      has_index = true;
      return int_field(index, 3);
    }
    if (key_is(k, "delta") || key_is(k, "message")) {
      const bool delta = key_is(k, "delta");
      auto& is_object = delta ? c.delta_is_object : c.message_is_object;
      auto& content = delta ? c.delta_content : c.message_content;
      is_object = peek() == '{';
      content = {};
      if (!is_object) return skip(3);
      return object(4, [&](const JsonString& inner) {
        if (key_is(inner, "content")) {
          content = {};
          return string_field(content, 4);
        }
        return skip(4);
      });
    }
    if (key_is(k, "text")) {
      c.text = {};
      return string_field(c.text, 3);
    }
    if (key_is(k, "finish_reason")) {
      c.finish_reason = {};
      return string_field(c.finish_reason, 3);
    }
    return skip(3);
  }

  std::string_view s_;
  std::size_t p_ = 0;
};

}  // namespace

void JsonString::append_to(std::string& out) const {
  if (!escaped) out.append(raw);
  else decode(raw, out);
}

bool scan_chunk(std::string_view text, ChunkFacts& facts) {
  facts = ChunkFacts{};
  return Scanner(text).document(facts);
}

}  // namespace tidegate::gateway
