#include "packed_linear.h"

#include <algorithm>
#include <cstring>

namespace tidegate::cache {
namespace {

typedef float v16 __attribute__((vector_size(64), aligned(4)));

constexpr std::size_t kRows = 6;  // rows per micro-tile: 6 accumulators + weights fit 16 AVX2 registers

// acc[m] += x[m][k] * panel[k] over all k, for `M` rows; then y = acc + bias.
template <std::size_t M>
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void micro_tile(const float* x, std::size_t ldx, const float* panel, std::size_t in, const float* bias,
                std::size_t width, float* y, std::size_t ldy) {
  v16 acc[M];
  for (std::size_t m = 0; m < M; ++m) acc[m] = v16{} ;
  for (std::size_t k = 0; k < in; ++k) {
    v16 w;
    std::memcpy(&w, panel + k * PackedLinear::kPanel, sizeof(w));
    for (std::size_t m = 0; m < M; ++m) acc[m] += x[m * ldx + k] * w;
  }
  for (std::size_t m = 0; m < M; ++m) {
    float* row = y + m * ldy;
    for (std::size_t j = 0; j < width; ++j) row[j] = acc[m][j] + bias[j];
  }
}

using TileFn = void (*)(const float*, std::size_t, const float*, std::size_t, const float*, std::size_t, float*, std::size_t);
constexpr TileFn kTiles[kRows + 1] = {nullptr, micro_tile<1>, micro_tile<2>, micro_tile<3>,
                                      micro_tile<4>, micro_tile<5>, micro_tile<6>};

}  // namespace

PackedLinear::PackedLinear(const float* w, std::size_t out, std::size_t in) : out_(out), in_(in) {
  const std::size_t panels = (out + kPanel - 1) / kPanel;
  panels_.assign(panels * in * kPanel, 0.f);
  for (std::size_t p = 0; p < panels; ++p) {
    for (std::size_t j = 0; j < kPanel && p * kPanel + j < out; ++j) {
      const float* src = w + (p * kPanel + j) * in;
      float* dst = panels_.data() + p * in * kPanel + j;
      for (std::size_t k = 0; k < in; ++k) dst[k * kPanel] = src[k];
    }
  }
}

void PackedLinear::apply(const float* x, std::size_t rows, const float* bias, float* y) const {
  const std::size_t panels = (out_ + kPanel - 1) / kPanel;
  // Panel-outer: each panel (in * 64 bytes) is read from memory once and stays in L1/L2 while
  // every row block uses it.
  for (std::size_t p = 0; p < panels; ++p) {
    const float* panel = panels_.data() + p * in_ * kPanel;
    const std::size_t col = p * kPanel;
    const std::size_t width = std::min(kPanel, out_ - col);
    for (std::size_t r = 0; r < rows; r += kRows) {
      const std::size_t m = std::min(kRows, rows - r);
      kTiles[m](x + r * in_, in_, panel, in_, bias + col, width, y + r * out_ + col, out_);
    }
  }
}

}  // namespace tidegate::cache
