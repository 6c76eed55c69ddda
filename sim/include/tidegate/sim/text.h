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

// Deterministic unit-length embedding of `text` (dimension `dim`).
std::vector<float> embed_text(std::string_view text, std::uint64_t seed, int dim);

}  // namespace tidegate::sim
