#pragma once
// The bf16 product on the CPU's matrix tiles (Intel AMX: 8 tile registers of 16 rows x 64
// bytes, one TDPBF16PS multiplies a 16x32 bf16 tile by a 32x16 one into 16x16 fp32). For a
// short prompt's few hundred rows that is several times the multiply-adds per cycle of
// AVX512-BF16's dot instruction, which is what the dense layers' latency is made of.
//
// Operands keep PackedLinear's bf16 layout, which is the tiles' layout: a weight panel's pair
// rows (16 outputs x 2 bf16 = 64 bytes) are a B tile's rows, and a row of activations as bf16
// is an A tile's row. The tile path pads K to whole tiles (32 values) with zeros on both sides
// and rows to whole tiles (16) with zero rows that are never stored, so every shape runs.
#include <cstddef>
#include <cstdint>

namespace tidegate::encoder::tiles {

constexpr std::size_t kTileRows = 16;  // rows of an A or C tile; pair rows of a B tile
constexpr std::size_t kTileK = 32;     // bf16 values in a 64-byte tile row

// True when the CPU has AMX-TILE and AMX-BF16 and the kernel lets this process use the tile
// data (Linux asks each process to request it: arch_prctl ARCH_REQ_XCOMP_PERM). Asked once.
// PackedLinear's cpu_has_bf16_tiles() also asks for AVX512-BF16, which converts the rows.
bool amx_bf16_usable();

// y[r, col + j] = bias[col + j] + sum_k x[r, k] w[col + j, k] for r < rows and the outputs of
// panels [first_panel, last_panel) (16 outputs each; `out` bounds the last one).
//   xb:     rows rounded up to kTileRows, each k_padded bf16 values (zero past in and past rows)
//   panels: PackedLinear's bf16 panels with k_padded / 2 pair rows each (zero-padded)
// Runs on the calling thread: it loads the tile configuration and releases the tiles after.
void apply_bf16_tiles(const std::uint16_t* xb, std::size_t rows, std::size_t k_padded, const std::uint16_t* panels,
                      std::size_t first_panel, std::size_t last_panel, std::size_t out, const float* bias, float* y,
                      std::size_t ldy);

}  // namespace tidegate::encoder::tiles
