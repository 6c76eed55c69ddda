#include "unicode_text.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/utf16.h>

#include <stdexcept>

namespace tidegate::encoder::unicode {
namespace {

const UNormalizer2* nfd() {
  static const UNormalizer2* instance = [] {
    UErrorCode err = U_ZERO_ERROR;
    const UNormalizer2* n = unorm2_getNFDInstance(&err);
    if (U_FAILURE(err) || n == nullptr) throw std::runtime_error("ICU NFD normaliser unavailable");
    return n;
  }();
  return instance;
}

}  // namespace

char32_t next_code_point(std::string_view s, std::size_t& pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  std::size_t len = 0;
  char32_t c = 0;
  char32_t min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, c = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, c = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, c = b0 & 0x07, min = 0x10000;
  } else {
    ++pos;
    return 0xFFFD;
  }
  if (pos + len > s.size()) {
    ++pos;
    return 0xFFFD;
  }
  for (std::size_t i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(s[pos + i]);
    if ((b & 0xC0) != 0x80) {
      ++pos;
      return 0xFFFD;
    }
    c = (c << 6) | (b & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
    ++pos;
    return 0xFFFD;
  }
  pos += len;
  return c;
}

bool is_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return u_isUWhiteSpace(static_cast<UChar32>(c));
}

bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  if (c < 0x80) return c < 0x20 || c == 0x7F;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
      return true;
    default:
      return false;
  }
}

bool is_punctuation(char32_t c) {
  if (c < 0x80) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  }
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

std::size_t decompose_stripped(char32_t c, char32_t* out, std::size_t cap) {
  UChar buf[32];
  UErrorCode err = U_ZERO_ERROR;
  const int32_t len = unorm2_getDecomposition(nfd(), static_cast<UChar32>(c), buf, 32, &err);
  std::size_t n = 0;
  auto keep = [&](UChar32 d) {
    if (n < cap && u_charType(d) != U_NON_SPACING_MARK) out[n++] = static_cast<char32_t>(d);
  };
  if (U_FAILURE(err) || len < 0) {
    keep(static_cast<UChar32>(c));
    return n;
  }
  for (int32_t i = 0; i < len;) {
    UChar32 d;
    U16_NEXT(buf, i, len, d);
    keep(d);
  }
  return n;
}

char32_t simple_lower(char32_t c) { return static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))); }

}  // namespace tidegate::encoder::unicode
