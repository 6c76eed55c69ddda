#include "tidegate/routing/prompt_blocks.h"

#include <algorithm>
#include <cstring>

namespace tidegate::routing {
namespace {

constexpr std::uint64_t kP1 = 0x9e3779b97f4a7c15ULL, kP2 = 0xc2b2ae3d27d4eb4fULL, kP3 = 0x165667b19e3779f9ULL,
                        kP4 = 0x27d4eb2f165667c5ULL;

std::uint64_t load64(const char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

std::uint64_t finish(std::uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

// Four independent multiply-rotate lanes over 32-byte stripes (the CPU runs them in parallel:
// several GB/s on one core, so a 16 KB prompt hashes in a couple of microseconds), then the
// tail word by word. Not cryptographic: a collision routes a request to a replica whose cache
// does not hold it, a slower prefill, never a wrong answer.
std::uint64_t hash_with(const char* p, std::size_t n, std::uint64_t seed) {
  std::uint64_t a = seed + kP1, b = seed + kP2, c = seed ^ kP3, d = seed - kP4;
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a = rotl(a + load64(p + i) * kP2, 31) * kP1;
    b = rotl(b + load64(p + i + 8) * kP2, 31) * kP1;
    c = rotl(c + load64(p + i + 16) * kP2, 31) * kP1;
    d = rotl(d + load64(p + i + 24) * kP2, 31) * kP1;
  }
  std::uint64_t h = rotl(a, 1) + rotl(b, 7) + rotl(c, 12) + rotl(d, 18) + n;
  for (; i + 8 <= n; i += 8) h = rotl(h ^ (load64(p + i) * kP2), 27) * kP1 + kP4;
  for (; i < n; ++i) h = rotl(h ^ (static_cast<unsigned char>(p[i]) * kP1), 11) * kP2;
  return finish(h);
}

}  // namespace

std::uint64_t hash_bytes(std::string_view bytes, std::uint64_t seed) { return hash_with(bytes.data(), bytes.size(), seed); }

std::size_t prompt_blocks(std::string_view prompt, const PromptBlocksConfig& cfg, std::vector<std::uint64_t>& out) {
  out.clear();
  if (cfg.block_bytes == 0) return 0;
  const std::size_t n = std::min(prompt.size(), cfg.max_bytes) / cfg.block_bytes;
  out.reserve(n);
  std::uint64_t chain = 0x74696465ULL;  // the previous block's hash seeds the next: a chain
  for (std::size_t k = 0; k < n; ++k) {
    chain = hash_with(prompt.data() + k * cfg.block_bytes, cfg.block_bytes, chain);
    out.push_back(chain);
  }
  return n;
}

}  // namespace tidegate::routing
