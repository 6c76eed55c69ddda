// A cheap check that catches what sentence embeddings are blind to: "Visual Studio 2008" vs
// "2010", "Baker County" vs "Wheeler County", "convert benzene into toluene" vs "convert toluene
// into benzene" embed at cosine > 0.97 yet ask different things.
#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "tidegate/cache/policy.h"

namespace tidegate::cache {
namespace {

bool word_char(unsigned char c) { return std::isalnum(c) || c == '_' || c == '\'' || c == '-' || c >= 0x80; }

struct Tokens {
  std::vector<std::string> numbers;
  std::set<std::string> words;  // lowercased
  std::set<std::string> names;  // lowercased capitalised words, except the first word and "I"
  bool negated = false;          // holds a negation: "not", "never", "can't", ...
};

// "Is coffee bad for you?" and "Is coffee not bad for you?" embed at 0.96 and ask the opposite.
// A negation on one side only is a different question; the same on both (or none) says nothing.
bool negation(const std::string& lower) {
  static const std::unordered_set<std::string_view> words = {"not", "no", "never", "cannot", "nor", "neither",
                                                             "none", "nothing", "nobody", "nowhere", "without"};
  if (words.count(lower)) return true;
  auto ends = [&](std::string_view tail) { return lower.size() > tail.size() && lower.compare(lower.size() - tail.size(), tail.size(), tail) == 0; };
  return ends("n't") || ends("n\u2019t");  // "don't", and "don’t" as phones type it
}

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
      t.negated = t.negated || negation(lower);
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

// Function words, which paraphrases move around freely; the rest are content words.
const std::unordered_set<std::string_view>& stopwords() {
  static const std::unordered_set<std::string_view> words = {
      "a", "an", "the", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "doing",
      "have", "has", "had", "having", "i", "me", "my", "we", "our", "you", "your", "he", "she", "it", "its",
      "they", "them", "their", "this", "that", "these", "those", "of", "in", "on", "at", "to", "for", "from",
      "by", "with", "about", "as", "into", "and", "or", "but", "if", "so", "than", "then", "there", "here",
      "can", "could", "should", "would", "will", "shall", "may", "might", "must", "what", "which", "who",
      "whom", "whose", "when", "where", "why", "how", "get", "got", "one", "ones", "some", "any", "much",
      "many", "more", "most", "very", "just", "also", "s", "t", "not", "no", "never", "nothing", "nobody",
      "none", "cannot", "without", "nor"};
  return words;
}

// Content words in order, ASCII-lowercased, clitics cut, plurals folded ("startups" =
// "startup"), each kept at its first occurrence.
std::vector<std::string> content_words(std::string_view s) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::size_t i = 0;
  while (i < s.size()) {
    if (!std::isalnum(static_cast<unsigned char>(s[i]))) {
      ++i;
      continue;
    }
    std::string w;
    while (i < s.size() && std::isalnum(static_cast<unsigned char>(s[i])))
      w.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(s[i++]))));
    std::string_view clitic;  // 's, 're, 't: not a word of its own ("India's" is "India")
    if (i + 1 < s.size() && s[i] == '\'' && std::isalpha(static_cast<unsigned char>(s[i + 1]))) {
      const std::size_t start = ++i;
      while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
      clitic = s.substr(start, i - start);
    }
    // "don't" reads as "do not": both stopwords, so it cannot reorder the words around it.
    if ((clitic == "t" || clitic == "T") && w.size() > 1 && w.back() == 'n') w.pop_back();
    if (stopwords().count(w)) continue;
    if (w.size() > 3 && w.back() == 's' && w[w.size() - 2] != 's') w.pop_back();
    if (!seen.insert(w).second) continue;
    out.push_back(std::move(w));
  }
  return out;
}

// The content words both sides share must come in the same order: "from Canada to India" and
// "from India to Canada" share every word and embed at 0.999, but swap the roles of two.
bool shared_words_in_same_order(std::string_view a, std::string_view b) {
  const auto wa = content_words(a), wb = content_words(b);
  const std::set<std::string_view> in_b(wb.begin(), wb.end());
  const std::set<std::string_view> in_a(wa.begin(), wa.end());
  std::vector<std::string_view> sa, sb;
  for (const auto& w : wa)
    if (in_b.count(w)) sa.push_back(w);
  for (const auto& w : wb)
    if (in_a.count(w)) sb.push_back(w);
  return sa == sb;  // same set by construction, so equal sequences mean equal order
}

}  // namespace

bool lexical_guard(std::string_view a, std::string_view b) { return lexical_guard(a, b, GuardChecks{}); }

bool lexical_guard(std::string_view a, std::string_view b, const GuardChecks& checks) {
  const auto ta = tokens(a), tb = tokens(b);
  return (!checks.numbers || ta.numbers == tb.numbers) && (!checks.negation || ta.negated == tb.negated) &&
         (!checks.names || (names_covered(ta, tb) && names_covered(tb, ta))) &&
         (!checks.order || shared_words_in_same_order(a, b));
}

}  // namespace tidegate::cache
