#include "packed_linear_tiles.h"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace tidegate::encoder::tiles {
namespace {

// Linux keeps the 8 KiB of tile data out of a process's saved state until the process asks for
// it (arch/x86/include/uapi/asm/prctl.h); without the grant the first tile load faults.
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtileData = 18;

// The 64-byte operand of LDTILECFG (Intel SDM, "TILECFG"): palette 1, and per tile its rows and
// bytes per row. Every tile here is 16 rows of 64 bytes: C tiles 0-3, A tiles 4-5, B tiles 6-7.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

constexpr std::size_t kPanel = 16;                     // outputs per weight panel (PackedLinear::kPanel)
constexpr std::size_t kBlockWords = kTileRows * kPanel * 2;  // bf16 values of one B tile

// C tiles (16 x 16 fp32 each) for up to two row tiles by two panels: 0 = (rows 0-15, panel 0),
// 1 = (rows 0-15, panel 1), 2 = (rows 16-31, panel 0), 3 = (rows 16-31, panel 1).
template <bool kTwoRowTiles, bool kTwoPanels>
__attribute__((target("amx-tile,amx-bf16"))) void multiply_block(const std::uint16_t* a, std::size_t k_padded,
                                                                 const std::uint16_t* b0, const std::uint16_t* b1,
                                                                 float* c) {
  const long lda = static_cast<long>(k_padded * sizeof(std::uint16_t));
  constexpr long kLdb = kPanel * 2 * sizeof(std::uint16_t);
  _tile_zero(0);
  if constexpr (kTwoPanels) _tile_zero(1);
  if constexpr (kTwoRowTiles) _tile_zero(2);
  if constexpr (kTwoRowTiles && kTwoPanels) _tile_zero(3);
  for (std::size_t kb = 0; kb < k_padded / kTileK; ++kb) {
    _tile_loadd(4, a + kb * kTileK, lda);
    if constexpr (kTwoRowTiles) _tile_loadd(5, a + kTileRows * k_padded + kb * kTileK, lda);
    _tile_loadd(6, b0 + kb * kBlockWords, kLdb);
    if constexpr (kTwoPanels) _tile_loadd(7, b1 + kb * kBlockWords, kLdb);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (kTwoPanels) _tile_dpbf16ps(1, 4, 7);
    if constexpr (kTwoRowTiles) _tile_dpbf16ps(2, 5, 6);
    if constexpr (kTwoRowTiles && kTwoPanels) _tile_dpbf16ps(3, 5, 7);
  }
  constexpr long kLdc = kPanel * sizeof(float);
  constexpr std::size_t kTileFloats = kTileRows * kPanel;
  _tile_stored(0, c, kLdc);
  if constexpr (kTwoPanels) _tile_stored(1, c + kTileFloats, kLdc);
  if constexpr (kTwoRowTiles) _tile_stored(2, c + 2 * kTileFloats, kLdc);
  if constexpr (kTwoRowTiles && kTwoPanels) _tile_stored(3, c + 3 * kTileFloats, kLdc);
}

using BlockFn = void (*)(const std::uint16_t*, std::size_t, const std::uint16_t*, const std::uint16_t*, float*);
constexpr BlockFn kBlocks[2][2] = {{multiply_block<false, false>, multiply_block<false, true>},
                                   {multiply_block<true, false>, multiply_block<true, true>}};

// Not GCC 12's _tile_loadconfig: its asm operand names only the first 8 bytes of the
// configuration as read, so the compiler dropped the stores to the rest (a #GP on LDTILECFG).
// Here the operand is the whole object; the memory clobber also orders the tile loads that
// follow (whose asm declares no memory read) after every store to their operands.
__attribute__((target("amx-tile"))) void load_config() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = kTileRows;
    config.bytes_per_row[t] = 64;
  }
  __asm__ volatile("ldtilecfg %0" : : "m"(config) : "memory");
}

__attribute__((target("amx-tile"))) void release() { _tile_release(); }

}  // namespace

bool amx_bf16_usable() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
    const bool amx_bf16 = (d >> 22) & 1u, amx_tile = (d >> 24) & 1u;
    if (!amx_bf16 || !amx_tile) return false;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
  }();
  return has;
}

void apply_bf16_tiles(const std::uint16_t* xb, std::size_t rows, std::size_t k_padded, const std::uint16_t* panels,
                      std::size_t first_panel, std::size_t last_panel, std::size_t out, const float* bias, float* y,
                      std::size_t ldy) {
  load_config();
  const std::size_t panel_words = (k_padded / 2) * kPanel * 2;
  alignas(64) float c[4 * kTileRows * kPanel];
  // Panel pairs outer: a pair's weights (k_padded x 64 bytes) stay in L1 while every row block
  // reads them; the rows (short prompts: tens of KiB) stay in L2.
  for (std::size_t p = first_panel; p < last_panel; p += 2) {
    const bool two_panels = p + 1 < last_panel;
    const std::uint16_t* b0 = panels + p * panel_words;
    for (std::size_t r = 0; r < rows; r += 2 * kTileRows) {
      const bool two_row_tiles = r + kTileRows < rows;
      kBlocks[two_row_tiles][two_panels](xb + r * k_padded, k_padded, b0, b0 + panel_words, c);
      for (std::size_t h = 0; h < (two_panels ? 2u : 1u); ++h) {
        const std::size_t col = (p + h) * kPanel;
        if (col >= out) break;
        const std::size_t width = std::min(kPanel, out - col);
        for (std::size_t t = 0; t < (two_row_tiles ? 2u : 1u); ++t) {
          const float* tile = c + (2 * t + h) * kTileRows * kPanel;
          const std::size_t valid_rows = std::min(kTileRows, rows - (r + t * kTileRows));
          for (std::size_t i = 0; i < valid_rows; ++i) {
            float* row = y + (r + t * kTileRows + i) * ldy + col;
            for (std::size_t j = 0; j < width; ++j) row[j] = tile[i * kPanel + j] + bias[col + j];
          }
        }
      }
    }
  }
  release();
}

}  // namespace tidegate::encoder::tiles
