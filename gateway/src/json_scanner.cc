#include "json_scanner.h"

#include <charconv>
#include <cstdlib>
#include <string>

#include "tidegate/common/utf8.h"

namespace tidegate::gateway {
namespace json_scan {

int hex4(std::string_view s, std::size_t i) {
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

// RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const auto cont = [&](std::size_t k) { return (b(k) & 0xC0u) == 0x80u; };
  const unsigned c = b(0);
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned c1 = b(1);
    if (c == 0xE0 && c1 < 0xA0) return 0;   // overlong
    if (c == 0xED && c1 >= 0xA0) return 0;  // surrogate
    return cont(1) && cont(2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned c1 = b(1);
    if (c == 0xF0 && c1 < 0x90) return 0;   // overlong
    if (c == 0xF4 && c1 >= 0x90) return 0;  // above U+10FFFF
    return cont(1) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

void to_number(std::string_view text, bool plain_integer, JsonNumber& out) {
  const char* first = text.data();
  const char* last = first + text.size();
  if (plain_integer) {
    if (auto r = std::from_chars(first, last, out.i); r.ec == std::errc() && r.ptr == last) {
      out.kind = JsonNumber::Kind::kInt;
      return;
    }
    if (text.front() != '-') {
      if (auto r = std::from_chars(first, last, out.u); r.ec == std::errc() && r.ptr == last) {
        out.kind = JsonNumber::Kind::kUint;
        return;
      }
    }
  }
  out.kind = JsonNumber::Kind::kDouble;
  out.d = std::strtod(std::string(text).c_str(), nullptr);
}

}  // namespace json_scan

void JsonString::append_to(std::string& out) const {
  if (!escaped) out.append(raw);
  else json_scan::decode(raw, out);
}

}  // namespace tidegate::gateway
