#include "tidegate/encoder/hash_embedder.h"

#include <stdexcept>
#include <string>

#include "minilm_internal.h"
#include "unicode_text.h"

namespace tidegate::encoder {
namespace {

std::uint64_t mix(std::uint64_t h) {  // splitmix64 finaliser: spreads FNV's weak low bits
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

class HashEmbedder final : public Embedder {
 public:
  explicit HashEmbedder(const HashEmbedderOptions& o) : o_(o) {}

  std::size_t dim() const override { return o_.dim; }
  std::string name() const override { return "hash"; }

  std::vector<float> embed(const std::vector<std::string>& texts, std::chrono::steady_clock::time_point) override {
    std::vector<float> out(texts.size() * o_.dim, 0.f);
    std::vector<std::size_t> starts;  // byte offset of each code point in the framed word
    std::string word;
    for (std::size_t t = 0; t < texts.size(); ++t) {
      float* v = out.data() + t * o_.dim;
      bool any = false;
      auto flush = [&] {
        if (word.empty()) return;
        word.push_back(' ');
        add_ngrams(word, starts, v);
        any = true;
        word.clear();
      };
      const std::string& text = texts[t];
      std::size_t pos = 0;
      while (pos < text.size()) {
        const char32_t c = unicode::next_code_point(text, pos);
        if (c == 0xFFFD || unicode::is_control(c) || unicode::is_whitespace(c) || unicode::is_punctuation(c)) {
          flush();
          continue;
        }
        if (word.empty()) word.push_back(' ');
        unicode::to_lower(c, [&](char32_t l) { unicode::append_utf8(word, l); });
      }
      flush();
      if (!any) v[mix(o_.seed) % o_.dim] = 1.f;
      l2_normalize(v, o_.dim);
    }
    return out;
  }

 private:
  void add_ngrams(const std::string& word, std::vector<std::size_t>& starts, float* v) const {
    starts.clear();
    for (std::size_t i = 0; i < word.size(); ++i) {
      if ((static_cast<unsigned char>(word[i]) & 0xC0) != 0x80) starts.push_back(i);
    }
    starts.push_back(word.size());
    const std::size_t chars = starts.size() - 1;
    for (std::size_t n = o_.min_n; n <= o_.max_n; ++n) {
      // A word shorter than n still contributes once, as a whole, so short words are not lost.
      if (chars < n && n != o_.min_n) break;
      const std::size_t count = chars >= n ? chars - n + 1 : 1;
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t end = std::min(i + n, chars);
        std::uint64_t h = 0xcbf29ce484222325ULL ^ o_.seed ^ (n * 0x9E3779B97F4A7C15ULL);
        for (std::size_t b = starts[i]; b < starts[end]; ++b) {
          h ^= static_cast<unsigned char>(word[b]);
          h *= 0x100000001b3ULL;
        }
        h = mix(h);
        v[h % o_.dim] += (h >> 63) ? 1.f : -1.f;
      }
    }
  }

  HashEmbedderOptions o_;
};

}  // namespace

std::unique_ptr<Embedder> make_hash_embedder(const HashEmbedderOptions& options) {
  if (options.dim == 0) throw std::invalid_argument("hash embedder: dim must be positive");
  if (options.min_n == 0 || options.min_n > options.max_n) throw std::invalid_argument("hash embedder: need 1 <= min_n <= max_n");
  return std::make_unique<HashEmbedder>(options);
}

}  // namespace tidegate::encoder
