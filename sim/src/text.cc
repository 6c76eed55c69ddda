#include "tidegate/sim/text.h"

#include <array>
#include <cmath>

namespace tidegate::sim {
namespace {

bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

constexpr std::array<std::string_view, 64> kWords = {
    " the", " of", " and", " to", " in", " is", " that", " for", " it", " as", " with", " on",
    " be", " at", " by", " this", " from", " or", " an", " but", " not", " are", " can", " all",
    " one", " has", " more", " time", " data", " model", " will", " each", " which", " some",
    " when", " also", " into", " over", " new", " two", " may", " then", " so", " like", " how",
    " our", " use", " way", " work", " part", " small", " large", " fast", " cache", " token",
    " batch", " queue", " node", " load", " cost", " test", " value", " state", " text"};

}  // namespace

std::vector<std::string_view> split_pieces(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    const std::size_t start = i;
    while (i < n && is_space(static_cast<unsigned char>(text[i]))) ++i;
    int chars = 0;
    while (i < n && chars < 4 && !is_space(static_cast<unsigned char>(text[i]))) {
      ++i;
      while (i < n && is_continuation(static_cast<unsigned char>(text[i]))) ++i;
      ++chars;
    }
    if (chars == 0 && !out.empty()) {
      // Trailing whitespace: extend the previous piece rather than count a token for it.
      const char* begin = out.back().data();
      out.back() = std::string_view(begin, static_cast<std::size_t>(text.data() + i - begin));
    } else {
      out.push_back(text.substr(start, i - start));
    }
  }
  return out;
}

std::int64_t count_tokens(std::string_view text) { return static_cast<std::int64_t>(split_pieces(text).size()); }

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::uint64_t hash_text(std::string_view text, std::uint64_t seed) {
  // FNV-1a then a mixing step: cheap and good enough to key deterministic replies.
  std::uint64_t h = 0xcbf29ce484222325ULL ^ mix64(seed);
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  return mix64(h);
}

std::string_view generated_token(std::uint64_t key, std::int32_t index) {
  return kWords[mix64(key + static_cast<std::uint64_t>(index)) % kWords.size()];
}

void PrefixBlockHasher::add_token(std::uint64_t token_hash) {
  running_ = mix64(running_ ^ token_hash);
  if (++in_block_ == block_tokens_) {
    blocks_.push_back(running_);
    in_block_ = 0;
  }
}

void PrefixBlockHasher::add_text(std::string_view text) {
  for (const auto piece : split_pieces(text)) add_token(hash_text(piece, 0));
}

std::vector<float> embed_text(std::string_view text, std::uint64_t seed, int dim) {
  std::vector<float> v(static_cast<std::size_t>(dim > 0 ? dim : 1));
  std::uint64_t state = hash_text(text, seed);
  double norm = 0;
  for (float& x : v) {
    state = mix64(state);
    // Uniform in [-1, 1): direction only matters after normalising.
    x = static_cast<float>(static_cast<double>(state >> 11) * 0x1.0p-52 - 1.0);
    norm += static_cast<double>(x) * x;
  }
  const double inv = norm > 0 ? 1.0 / std::sqrt(norm) : 0.0;
  for (float& x : v) x = static_cast<float>(x * inv);
  return v;
}

}  // namespace tidegate::sim
