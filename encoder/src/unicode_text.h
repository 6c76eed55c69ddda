#pragma once
// The few Unicode facts the BERT normaliser needs (ICU supplies the tables); ASCII stays on a
// fast path without ICU calls because almost every prompt is mostly ASCII.
#include <cstddef>
#include <string>
#include <string_view>

#include "tidegate/common/utf8.h"

namespace tidegate::encoder::unicode {

// Decodes one code point at `pos` and advances it. An invalid or truncated sequence, an
// overlong form or a surrogate yields U+FFFD and consumes one byte.
char32_t next_code_point(std::string_view s, std::size_t& pos);
using tidegate::append_utf8;

// Rust char::is_whitespace (the White_Space property).
bool is_whitespace(char32_t c);
// Cc, Cf and Co (tab, LF, CR excluded). Unassigned code points (Cn) are kept, as HF tokenizers
// does (its category tables predate Unicode 11, so the 13 format characters added since then
// are kept there and dropped here; nothing else differs).
bool is_control(char32_t c);
// ASCII punctuation (includes $+<=>^`|~) or a Unicode P* category.
bool is_punctuation(char32_t c);
// CJK Unified Ideographs blocks as BERT defines them (not Hiragana, Katakana or Hangul).
bool is_cjk(char32_t c);
// Calls emit(c) for each code point of the canonical decomposition of c that is not a
// non-spacing mark (Mn): NFD then strip accents.
template <typename F>
void strip_accents(char32_t c, F&& emit);
// Full lowercase of one code point, per code point (no context), as Rust char::to_lowercase.
template <typename F>
void to_lower(char32_t c, F&& emit);

// Implementation details for the templates.
std::size_t decompose_stripped(char32_t c, char32_t* out, std::size_t cap);
char32_t simple_lower(char32_t c);

template <typename F>
void strip_accents(char32_t c, F&& emit) {
  if (c < 0xC0) {  // nothing below U+00C0 decomposes or is a mark
    emit(c);
    return;
  }
  char32_t buf[32];
  const std::size_t n = decompose_stripped(c, buf, 32);
  for (std::size_t i = 0; i < n; ++i) emit(buf[i]);
}

template <typename F>
void to_lower(char32_t c, F&& emit) {
  if (c < 0x80) {
    emit(c >= 'A' && c <= 'Z' ? c + 32 : c);
  } else if (c == 0x130) {  // the one code point whose full lowercase is two code points
    emit(U'i');
    emit(U'\u0307');
  } else {
    emit(simple_lower(c));
  }
}

}  // namespace tidegate::encoder::unicode
