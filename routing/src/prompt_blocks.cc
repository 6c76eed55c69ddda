#include "tidegate/routing/prompt_blocks.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tidegate::routing {
namespace {

constexpr std::uint64_t kP1 = 0x9e3779b97f4a7c15ULL, kP2 = 0xc2b2ae3d27d4eb4fULL, kP3 = 0x165667b19e3779f9ULL,
                        kP4 = 0x27d4eb2f165667c5ULL;
constexpr std::uint64_t kSeedBlocks = 0x74696465ULL;

// The hash, the same on every CPU (the AVX2 path below computes exactly this, and a test
// compares them). Eight 64-bit lanes over 64-byte stripes: each stripe adds to lane j the
// product of its keyed word's two 32-bit halves (nonlinear mixing, one vpmuludq on AVX2) and
// the neighbouring lane's word itself (so that no input bit is lost when a half is zero). The
// key moves on every stripe (a Weyl sequence), so equal stripes in swapped places give other
// sums. A digest avalanches each lane, folds them and finishes with the length; it leaves the
// state as it is, so the next block carries on from it (the chain). Not cryptographic: a
// collision routes a request to a replica whose cache does not hold it, a slower prefill,
// never a wrong answer.
struct State {
  std::uint64_t acc[8];
  std::uint64_t key[8];
};

State initial_state(std::uint64_t seed) {
  return {{seed ^ kP1, seed ^ kP2, seed ^ kP3, seed ^ kP4, seed + kP1, seed + kP2, seed + kP3, seed + kP4},
          {kP2, kP3, kP4, kP1, kP3 ^ seed, kP4 ^ seed, kP1 ^ seed, kP2 ^ seed}};
}

std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

std::uint64_t finish(std::uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

std::uint64_t digest(const State& s, std::uint64_t length) {
  constexpr std::uint64_t kMul[4] = {kP1, kP2, kP3, kP4};
  constexpr std::uint64_t kFlip[4] = {kP4, kP3, kP2, kP1};
  std::uint64_t m[4];
  for (int j = 0; j < 4; ++j) {
    std::uint64_t lo = s.acc[j], hi = s.acc[j + 4] ^ kFlip[j];
    lo = (lo ^ (lo >> 31)) * kMul[j];
    hi = (hi ^ (hi >> 31)) * kMul[j];
    m[j] = (lo ^ (lo >> 29)) ^ (hi ^ (hi >> 29));
  }
  return finish(m[0] ^ rotl(m[1], 16) ^ rotl(m[2], 32) ^ rotl(m[3], 48) ^ length * kP4);
}

// Portable stripes: the reference the AVX2 path must equal.
void stripes_portable(State& s, const char* p, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i, p += 64) {
    std::uint64_t d[8];
    std::memcpy(d, p, sizeof(d));
    for (int j = 0; j < 8; ++j) {
      const std::uint64_t x = d[j] ^ s.key[j];
      s.acc[j] += (x & 0xffffffffULL) * (x >> 32) + d[j ^ 1];
      s.key[j] += kP1;
    }
  }
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) void stripes_avx2(State& s, const char* p, std::size_t count) {
  __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.acc));
  __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.acc + 4));
  __m256i k0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.key));
  __m256i k1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.key + 4));
  const __m256i step = _mm256_set1_epi64x(static_cast<long long>(kP1));
  for (std::size_t i = 0; i < count; ++i, p += 64) {
    const __m256i d0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i d1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32));
    const __m256i x0 = _mm256_xor_si256(d0, k0), x1 = _mm256_xor_si256(d1, k1);
    // mul_epu32 multiplies the low halves of each 64-bit lane: lo(x) * lo(x >> 32).
    a0 = _mm256_add_epi64(a0, _mm256_add_epi64(_mm256_mul_epu32(x0, _mm256_srli_epi64(x0, 32)),
                                                _mm256_shuffle_epi32(d0, 0x4E)));  // swap words 0<->1, 2<->3
    a1 = _mm256_add_epi64(a1, _mm256_add_epi64(_mm256_mul_epu32(x1, _mm256_srli_epi64(x1, 32)),
                                                _mm256_shuffle_epi32(d1, 0x4E)));
    k0 = _mm256_add_epi64(k0, step);
    k1 = _mm256_add_epi64(k1, step);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(s.acc), a0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(s.acc + 4), a1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(s.key), k0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(s.key + 4), k1);
}
#endif

using StripesFn = void (*)(State&, const char*, std::size_t);

StripesFn pick_stripes(bool allow_avx2) {
#if defined(__x86_64__)
  __builtin_cpu_init();  // may run before the constructors that would otherwise do it
  if (allow_avx2 && __builtin_cpu_supports("avx2")) return stripes_avx2;
#endif
  (void)allow_avx2;
  return stripes_portable;
}

// Bytes [p, p + n): whole stripes, then the tail zero-padded to a stripe, with its length in
// the key so that "a" and "a\0" differ.
void absorb(StripesFn stripes, State& s, const char* p, std::size_t n) {
  const std::size_t whole = n / 64;
  if (whole > 0) stripes(s, p, whole);
  if (whole * 64 == n) return;
  char tail[64] = {};
  std::memcpy(tail, p + whole * 64, n - whole * 64);
  s.key[0] ^= n - whole * 64;
  stripes(s, tail, 1);
}

std::size_t blocks_with(StripesFn stripes, std::string_view prompt, const PromptBlocksConfig& cfg,
                        std::vector<std::uint64_t>& out) {
  out.clear();
  if (cfg.block_bytes == 0) return 0;
  const std::size_t n = std::min(prompt.size(), cfg.max_bytes) / cfg.block_bytes;
  out.reserve(n);
  // One pass: the lanes carry on from block to block, so block k's digest covers every byte of
  // blocks 0..k (a chain) without starting over at each block.
  State s = initial_state(kSeedBlocks);
  for (std::size_t k = 0; k < n; ++k) {
    absorb(stripes, s, prompt.data() + k * cfg.block_bytes, cfg.block_bytes);
    out.push_back(digest(s, (k + 1) * cfg.block_bytes));
  }
  return n;
}

StripesFn fastest_stripes() {
  static const StripesFn fn = pick_stripes(true);  // a function-local static: safe from other initialisers
  return fn;
}

}  // namespace

std::uint64_t hash_bytes(std::string_view bytes, std::uint64_t seed) {
  State s = initial_state(seed);
  absorb(fastest_stripes(), s, bytes.data(), bytes.size());
  return digest(s, bytes.size());
}

std::size_t prompt_blocks(std::string_view prompt, const PromptBlocksConfig& cfg, std::vector<std::uint64_t>& out) {
  return blocks_with(fastest_stripes(), prompt, cfg, out);
}

namespace detail {
std::size_t prompt_blocks_portable(std::string_view prompt, const PromptBlocksConfig& cfg,
                                   std::vector<std::uint64_t>& out) {
  return blocks_with(pick_stripes(false), prompt, cfg, out);
}
}  // namespace detail

}  // namespace tidegate::routing
