// BOOST_ASSERT handler for the targets that include Beast's parser (built with
// BOOST_ENABLE_ASSERT_HANDLER): every failed assertion aborts, as BOOST_ASSERT would, except
// one that is wrong in Boost 1.81 itself: basic_parser::parse_chunk_header asserts n >= 5 when
// it re-enters after a final chunk "0\r\n" that ended a read, though the next read may bring
// a single byte ("0\r\n" then "\r" then "\n" is a valid stream). Beast fixed the assertion in
// boostorg/beast PR 2861 (2024); release builds (NDEBUG) never had it. Past it the code is
// the same as in a release build.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace boost {

void assertion_failed(char const* expr, char const* function, char const* file, long line) {
  if (std::strcmp(expr, "n >= 5") == 0 && std::strstr(function, "parse_chunk_header") != nullptr) return;
  std::fprintf(stderr, "%s:%ld: %s: Assertion `%s' failed.\n", file, line, function, expr);
  std::abort();
}

void assertion_failed_msg(char const* expr, char const* msg, char const* function, char const* file, long line) {
  std::fprintf(stderr, "%s:%ld: %s: Assertion `%s' failed: %s\n", file, line, function, expr, msg);
  std::abort();
}

}  // namespace boost
