#pragma once
// Chained block hashes of a prompt's bytes, for prefix-aware routing in a gateway that does not
// tokenize: the prompt (a chat request's `messages` array as the client sent it, or a
// completion's `prompt`) is cut into fixed-size byte blocks, and block i's hash covers every
// byte of blocks 0..i. Two requests share their first k hashes exactly when they share their
// first k blocks of bytes, which is when an engine's prefix cache holds that much of one for
// the other (the engine renders equal message prefixes into equal token prefixes).
//
// Only whole blocks are hashed, as engines cache only whole KV blocks; at most `max_bytes`
// (rounded down to whole blocks) are read, so a huge prompt costs a bounded amount.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tidegate::routing {

struct PromptBlocksConfig {
  std::size_t block_bytes = 512;     // ~128 tokens of English (about 4 bytes a token)
  std::size_t max_bytes = 1u << 20;  // hash at most this much of a prompt
};

// Appends the chained hashes to `out` (cleared first); returns how many.
std::size_t prompt_blocks(std::string_view prompt, const PromptBlocksConfig& config, std::vector<std::uint64_t>& out);

// Hash of a whole byte string (session ids), the same mixer.
std::uint64_t hash_bytes(std::string_view bytes, std::uint64_t seed = 0);

namespace detail {
// prompt_blocks without the vector unit: the reference the fast path is tested against (every
// CPU must compute the same hashes, or gateways sharing routing state would disagree).
std::size_t prompt_blocks_portable(std::string_view prompt, const PromptBlocksConfig& config,
                                   std::vector<std::uint64_t>& out);
}  // namespace detail

}  // namespace tidegate::routing
