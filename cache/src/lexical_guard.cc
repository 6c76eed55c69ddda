// A cheap check that catches what sentence embeddings are blind to: "Visual Studio 2008" vs
// "2010", "Baker County" vs "Wheeler County" embed at cosine > 0.97 yet ask different things.
#include <algorithm>
#include <cctype>
#include <set>
#include <vector>

#include "tidegate/cache/policy.h"

namespace tidegate::cache {
namespace {

bool word_char(unsigned char c) { return std::isalnum(c) || c == '_' || c == '\'' || c == '-' || c >= 0x80; }

struct Tokens {
  std::vector<std::string> numbers;
  std::set<std::string> words;  // lowercased
  std::set<std::string> names;  // lowercased capitalised words, except the first word and "I"
};

Tokens tokens(std::string_view s) {
  Tokens t;
  std::size_t i = 0, index = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (std::isdigit(c)) {
      std::size_t j = i;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) ||
                              ((s[j] == '.' || s[j] == ',') && j + 1 < s.size() &&
                               std::isdigit(static_cast<unsigned char>(s[j + 1])))))
        ++j;
      t.numbers.emplace_back(s.substr(i, j - i));
      i = j;
      ++index;
    } else if (std::isalpha(c) || c >= 0x80) {
      std::size_t j = i;
      while (j < s.size() && word_char(static_cast<unsigned char>(s[j])) &&
             !std::isdigit(static_cast<unsigned char>(s[j])))
        ++j;
      std::string w(s.substr(i, j - i));
      std::string lower = w;
      for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (index > 0 && std::isupper(c) && w != "I") t.names.insert(lower);
      t.words.insert(std::move(lower));
      i = j;
      ++index;
    } else {
      ++i;
    }
  }
  std::sort(t.numbers.begin(), t.numbers.end());
  return t;
}

bool names_covered(const Tokens& a, const Tokens& b) {
  return std::all_of(a.names.begin(), a.names.end(), [&](const std::string& n) { return b.words.count(n) > 0; });
}

}  // namespace

bool lexical_guard(std::string_view a, std::string_view b) {
  const auto ta = tokens(a), tb = tokens(b);
  return ta.numbers == tb.numbers && names_covered(ta, tb) && names_covered(tb, ta);
}

}  // namespace tidegate::cache
