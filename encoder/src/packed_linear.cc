#include "packed_linear.h"

#include "intra_op.h"
#include "packed_linear_tiles.h"
#include "tidegate/common/cpu_clones.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>
#include <cstring>

namespace tidegate::encoder {
namespace {

// Half a panel: one AVX2 register. A panel is kept as two halves rather than one 64-byte vector
// because GCC lowers a 64-byte generic vector on AVX2 by spilling every accumulator to the stack
// (measured 44 ms for a one-prompt MiniLM embed against 5 ms with halves on this AVX2 host).
typedef float v8 __attribute__((vector_size(32), aligned(4)));
static_assert(PackedLinear::kPanel == 16, "a panel is two v8 halves");

constexpr std::size_t kRows = 6;  // rows per micro-tile: 12 accumulators + 2 weights + 1 broadcast fit 16 AVX2 registers

// acc[m] += x[m][k] * panel[k] over all k, for `M` rows; then y = acc + bias.
template <std::size_t M>
TIDEGATE_CPU_CLONES
void micro_tile(const float* x, std::size_t ldx, const float* panel, std::size_t in, const float* bias,
                std::size_t width, float* y, std::size_t ldy) {
  v8 lo[M], hi[M];
  for (std::size_t m = 0; m < M; ++m) lo[m] = hi[m] = v8{};
  for (std::size_t k = 0; k < in; ++k) {
    v8 wl, wh;
    std::memcpy(&wl, panel + k * PackedLinear::kPanel, sizeof(wl));
    std::memcpy(&wh, panel + k * PackedLinear::kPanel + 8, sizeof(wh));
    for (std::size_t m = 0; m < M; ++m) {
      const float xv = x[m * ldx + k];
      lo[m] += xv * wl;
      hi[m] += xv * wh;
    }
  }
  // Through a plain array: indexing a vector by a variable lane would pin it to the stack.
  for (std::size_t m = 0; m < M; ++m) {
    float lanes[PackedLinear::kPanel];
    std::memcpy(lanes, &lo[m], sizeof(lo[m]));
    std::memcpy(lanes + 8, &hi[m], sizeof(hi[m]));
    float* row = y + m * ldy;
    for (std::size_t j = 0; j < width; ++j) row[j] = lanes[j] + bias[j];
  }
}

using TileFn = void (*)(const float*, std::size_t, const float*, std::size_t, const float*, std::size_t, float*, std::size_t);
constexpr TileFn kTiles[kRows + 1] = {nullptr, micro_tile<1>, micro_tile<2>, micro_tile<3>,
                                      micro_tile<4>, micro_tile<5>, micro_tile<6>};

// Round to nearest even, as the hardware's own conversions do. MiniLM has no NaN or Inf.
std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

// A row as bf16 pairs, one 32-bit word per pair (the lower half first, so the pairs are just the
// row's bf16 values in order), zero-padded to a whole pair. The hardware conversion rounds to
// nearest even like to_bf16.
__attribute__((target("avx512f,avx512bf16"))) void rows_to_bf16(const float* src, std::size_t in,
                                                                std::uint32_t* dst) {
  std::size_t k = 0;
  for (; k + 16 <= in; k += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(reinterpret_cast<std::uint16_t*>(dst) + k),
                        (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + k)));
  for (; k < in; k += 2) {
    const std::uint32_t lo = to_bf16(src[k]);
    const std::uint32_t hi = k + 1 < in ? to_bf16(src[k + 1]) : 0u;
    dst[k / 2] = lo | (hi << 16);
  }
}

// AVX-512 has 32 vector registers: a tile of two panels by up to 12 rows keeps 24
// accumulators, two weight vectors and a broadcast in registers, so each broadcast row value
// feeds two dot instructions.
constexpr std::size_t kRowsBf16 = 12;

// acc[m][h] += sum over pairs k2 of x[m][2k2..2k2+1] . panel_h[k2][j][0..1]; y = acc + bias,
// for `P` (1 or 2) adjacent panels. xp holds each row's values as bf16 pairs, one 32-bit word
// per pair, so a broadcast feeds vdpbf16ps directly.
template <std::size_t M, std::size_t P>
__attribute__((target("avx512f,avx512bf16"))) void micro_tile_bf16(const std::uint32_t* xp, std::size_t ldx,
                                                                   const std::uint16_t* panel, std::size_t pairs,
                                                                   const float* bias, std::size_t width, float* y,
                                                                   std::size_t ldy) {
  constexpr std::size_t kStep = 2 * PackedLinear::kPanel;  // bf16 values per pair row of a panel
  __m512 acc[M][P];
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t h = 0; h < P; ++h) acc[m][h] = _mm512_setzero_ps();
  const std::uint16_t* second = panel + pairs * kStep;
  for (std::size_t k2 = 0; k2 < pairs; ++k2) {
    __m512i w[P];
    w[0] = _mm512_loadu_si512(panel + k2 * kStep);
    if constexpr (P == 2) w[1] = _mm512_loadu_si512(second + k2 * kStep);
    for (std::size_t m = 0; m < M; ++m) {
      const __m512i xb = _mm512_set1_epi32(static_cast<int>(xp[m * ldx + k2]));
      for (std::size_t h = 0; h < P; ++h) acc[m][h] = _mm512_dpbf16_ps(acc[m][h], (__m512bh)xb, (__m512bh)w[h]);
    }
  }
  // width counts the valid outputs over all P panels (the last panel may be partial).
  for (std::size_t h = 0; h < P; ++h) {
    const std::size_t valid = std::min(PackedLinear::kPanel, width - h * PackedLinear::kPanel);
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1u);
    const __m512 b = _mm512_maskz_loadu_ps(mask, bias + h * PackedLinear::kPanel);
    for (std::size_t m = 0; m < M; ++m)
      _mm512_mask_storeu_ps(y + m * ldy + h * PackedLinear::kPanel, mask, _mm512_add_ps(acc[m][h], b));
  }
}

using TileBf16Fn = void (*)(const std::uint32_t*, std::size_t, const std::uint16_t*, std::size_t, const float*,
                            std::size_t, float*, std::size_t);
template <std::size_t P, std::size_t... M>
constexpr auto make_bf16_tiles(std::index_sequence<M...>) {
  return std::array<TileBf16Fn, sizeof...(M)>{(M == 0 ? nullptr : &micro_tile_bf16<M == 0 ? 1 : M, P>)...};
}
constexpr auto kTilesBf16One = make_bf16_tiles<1>(std::make_index_sequence<kRowsBf16 + 1>{});
constexpr auto kTilesBf16Two = make_bf16_tiles<2>(std::make_index_sequence<kRowsBf16 + 1>{});

// Runs body(first, last) over [0, units), split across the pool's threads when the product is
// big enough to pay for the hand-off (about 10 microseconds of work).
template <typename Body>
void split_units(IntraOpPool* pool, std::size_t units, std::size_t macs, const Body& body) {
  constexpr std::size_t kMinMacsToSplit = std::size_t{1} << 20;
  if (pool == nullptr || macs < kMinMacsToSplit || units < 2) return body(0, units);
  // Several parts per thread, taken in turn: a helper that wakes late takes fewer.
  constexpr std::size_t kPartsPerThread = 3;
  const std::size_t parts = std::min(units, kPartsPerThread * pool->threads());
  pool->run(parts, [&](std::size_t part) { body(units * part / parts, units * (part + 1) / parts); });
}

}  // namespace

bool cpu_has_bf16_dot() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
  return has;
}

// The tile path converts rows with AVX512-BF16 as well; every CPU with AMX-BF16 has both.
bool cpu_has_bf16_tiles() { return cpu_has_bf16_dot() && tiles::amx_bf16_usable(); }

namespace {

DenseMath runnable(DenseMath math) {
  if (math == DenseMath::kBf16Tiles && !cpu_has_bf16_tiles()) math = DenseMath::kBf16;
  if (math == DenseMath::kBf16 && !cpu_has_bf16_dot()) math = DenseMath::kFp32;
  return math;
}

}  // namespace

PackedLinear::PackedLinear(const float* w, std::size_t out, std::size_t in, DenseMath math)
    : out_(out), in_(in), math_(runnable(math)) {
  const std::size_t panels = (out + kPanel - 1) / kPanel;
  if (math_ != DenseMath::kFp32) {
    // The tiles read whole 32-value blocks of K: the pairs past `in` stay zero.
    pairs_ = math_ == DenseMath::kBf16Tiles ? (in + tiles::kTileK - 1) / tiles::kTileK * tiles::kTileK / 2 : (in + 1) / 2;
    bf16_.assign(panels * pairs_ * kPanel * 2, 0);
    for (std::size_t p = 0; p < panels; ++p) {
      for (std::size_t j = 0; j < kPanel && p * kPanel + j < out; ++j) {
        const float* src = w + (p * kPanel + j) * in;
        std::uint16_t* dst = bf16_.data() + p * pairs_ * kPanel * 2 + j * 2;
        for (std::size_t k = 0; k < in; ++k) dst[(k / 2) * kPanel * 2 + (k % 2)] = to_bf16(src[k]);
      }
    }
    return;
  }
  panels_.assign(panels * in * kPanel, 0.f);
  for (std::size_t p = 0; p < panels; ++p) {
    for (std::size_t j = 0; j < kPanel && p * kPanel + j < out; ++j) {
      const float* src = w + (p * kPanel + j) * in;
      float* dst = panels_.data() + p * in * kPanel + j;
      for (std::size_t k = 0; k < in; ++k) dst[k * kPanel] = src[k];
    }
  }
}

void PackedLinear::apply(const float* x, std::size_t rows, const float* bias, float* y, IntraOpPool* pool) const {
  if (math_ != DenseMath::kFp32) {
    apply_bf16(x, rows, bias, y, pool);
    return;
  }
  const std::size_t panels = (out_ + kPanel - 1) / kPanel;
  // Panel-outer: each panel (in * 64 bytes) is read from memory once and stays in L1/L2 while
  // every row block uses it.
  split_units(pool, panels, rows * in_ * out_, [&](std::size_t first, std::size_t last) {
    for (std::size_t p = first; p < last; ++p) {
      const float* panel = panels_.data() + p * in_ * kPanel;
      const std::size_t col = p * kPanel;
      const std::size_t width = std::min(kPanel, out_ - col);
      for (std::size_t r = 0; r < rows; r += kRows) {
        const std::size_t m = std::min(kRows, rows - r);
        kTiles[m](x + r * in_, in_, panel, in_, bias + col, width, y + r * out_ + col, out_);
      }
    }
  });
}

void PackedLinear::apply_bf16(const float* x, std::size_t rows, const float* bias, float* y,
                              IntraOpPool* pool) const {
  const bool on_tiles = math_ == DenseMath::kBf16Tiles;
  // The tiles read whole 16-row tiles: the rows past `rows` are zeros whose sums are never stored.
  const std::size_t rows_held = on_tiles ? (rows + tiles::kTileRows - 1) / tiles::kTileRows * tiles::kTileRows : rows;
  // Short prompts reuse the thread's block (a fresh vector per product was an allocation 24
  // times a forward pass); big batches allocate, so no thread keeps their size for good. The
  // pool's helpers read the caller's copy through `xb` (a thread_local named inside the lambda
  // would be the helper's own).
  constexpr std::size_t kReusedWords = std::size_t{1} << 16;  // 256 KiB: 85 rows of 1,536
  thread_local std::vector<std::uint32_t> reused;
  std::vector<std::uint32_t> fresh;
  std::vector<std::uint32_t>& xp = rows_held * pairs_ <= kReusedWords ? reused : fresh;
  if (xp.size() < rows_held * pairs_) xp.resize(rows_held * pairs_);
  std::uint32_t* xb = xp.data();
  const std::size_t row_pairs = (in_ + 1) / 2;
  for (std::size_t r = 0; r < rows; ++r) {
    rows_to_bf16(x + r * in_, in_, xb + r * pairs_);
    std::fill(xb + r * pairs_ + row_pairs, xb + (r + 1) * pairs_, 0u);
  }
  std::fill(xb + rows * pairs_, xb + rows_held * pairs_, 0u);
  const std::size_t panels = (out_ + kPanel - 1) / kPanel;
  const std::size_t pairs_of_panels = (panels + 1) / 2;
  if (on_tiles) {
    const auto* xb16 = reinterpret_cast<const std::uint16_t*>(xb);
    split_units(pool, pairs_of_panels, rows * in_ * out_, [&](std::size_t first, std::size_t last) {
      tiles::apply_bf16_tiles(xb16, rows, 2 * pairs_, bf16_.data(), 2 * first, std::min(panels, 2 * last), out_, bias,
                              y, out_);
    });
    return;
  }
  // Rows split into equal tiles (9 rows run as 5 + 4, not 8 + 1): a thin tile pays a full pass
  // over the panel for few multiply-adds.
  const std::size_t row_tiles = (rows + kRowsBf16 - 1) / kRowsBf16;
  split_units(pool, pairs_of_panels, rows * in_ * out_, [&](std::size_t first, std::size_t last) {
    for (std::size_t p = 2 * first; p < std::min(panels, 2 * last); p += 2) {
      const bool two = p + 1 < panels;
      const std::uint16_t* panel = bf16_.data() + p * pairs_ * kPanel * 2;
      const std::size_t col = p * kPanel;
      const std::size_t width = std::min((two ? 2 : 1) * kPanel, out_ - col);
      const auto& kernels = two ? kTilesBf16Two : kTilesBf16One;
      std::size_t r = 0;
      for (std::size_t t = 0; t < row_tiles; ++t) {
        const std::size_t m = (rows - r + (row_tiles - t) - 1) / (row_tiles - t);
        kernels[m](xb + r * pairs_, pairs_, panel, pairs_, bias + col, width, y + r * out_ + col, out_);
        r += m;
      }
    }
  });
}

}  // namespace tidegate::encoder
