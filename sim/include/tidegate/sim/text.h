#pragma once
// The simulator's stand-in tokenizer and text generator. Real tokenizers average ~4 characters
// of English per token; splitting on whitespace and then into pieces of at most 4 characters
// lands within ~20% of Llama-3's count on English prose, which is what load shaping needs.
// Pieces keep their leading whitespace, so concatenating them gives back the text exactly
// (that is what makes --echo verbatim).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tidegate::sim {

// Splits text into pieces: optional whitespace run + up to 4 non-space bytes (UTF-8 sequences
// are never cut). Trailing whitespace joins the last piece. concat(pieces) == text.
std::vector<std::string_view> split_pieces(std::string_view text);
std::int64_t count_tokens(std::string_view text);

// Chat prompt tokens: sum of content tokens + 4 per message (role and template markers) + 3
// (assistant prefix), roughly what Llama-3's chat template adds.
constexpr std::int64_t kTokensPerMessage = 4;
constexpr std::int64_t kTokensPerChat = 3;

// 64-bit mixing hash (splitmix64 finaliser), stable across platforms and runs.
std::uint64_t mix64(std::uint64_t x);
std::uint64_t hash_text(std::string_view text, std::uint64_t seed);

// Deterministic output token `index` (0-based) of a reply keyed by `key` (seed ^ prompt hash):
// a space followed by a common English word, one token each.
std::string_view generated_token(std::uint64_t key, std::int32_t index);

// Chained hashes of a token stream's consecutive blocks of `block_tokens` tokens, the keys of
// vLLM's automatic prefix cache: block i's hash covers every token up to the end of block i,
// so equal hashes mean equal prefixes. Only full blocks get a hash (vLLM caches full blocks).
class PrefixBlockHasher final {
 public:
  explicit PrefixBlockHasher(std::int32_t block_tokens) : block_tokens_(block_tokens < 1 ? 1 : block_tokens) {}
  void add_token(std::uint64_t token_hash);
  void add_text(std::string_view text);  // each piece of split_pieces() is one token
  const std::vector<std::uint64_t>& blocks() const { return blocks_; }
  std::vector<std::uint64_t> take() { return std::move(blocks_); }

 private:
  std::int32_t block_tokens_;
  std::int32_t in_block_ = 0;
  std::uint64_t running_ = 0x51afd7ed558ccd1dULL;  // hash of everything so far
  std::vector<std::uint64_t> blocks_;
};

// Deterministic unit-length embedding of `text` (dimension `dim`).
std::vector<float> embed_text(std::string_view text, std::uint64_t seed, int dim);

}  // namespace tidegate::sim
