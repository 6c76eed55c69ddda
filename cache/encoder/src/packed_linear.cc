#include "packed_linear.h"

#include <algorithm>
#include <cstring>

namespace tidegate::cache {
namespace {

typedef float v16 __attribute__((vector_size(64), aligned(4)));
typedef _Float16 h16 __attribute__((vector_size(32), aligned(2)));

inline v16 load_panel_row(const float* p) {
  v16 w;
  std::memcpy(&w, p, sizeof(w));
  return w;
}
inline v16 load_panel_row(const _Float16* p) {
  h16 h;
  std::memcpy(&h, p, sizeof(h));
  return __builtin_convertvector(h, v16);
}

constexpr std::size_t kRows = 6;  // rows per micro-tile: 6 accumulators + weights fit 16 AVX2 registers

// acc[m] += x[m][k] * panel[k] over all k, for `M` rows; then y = acc + bias.
template <std::size_t M, typename W>
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void micro_tile(const float* x, std::size_t ldx, const W* panel, std::size_t in, const float* bias,
                std::size_t width, float* y, std::size_t ldy) {
  v16 acc[M];
  for (std::size_t m = 0; m < M; ++m) acc[m] = v16{};
  for (std::size_t k = 0; k < in; ++k) {
    const v16 w = load_panel_row(panel + k * PackedLinear::kPanel);
    for (std::size_t m = 0; m < M; ++m) acc[m] += x[m * ldx + k] * w;
  }
  for (std::size_t m = 0; m < M; ++m) {
    float* row = y + m * ldy;
    for (std::size_t j = 0; j < width; ++j) row[j] = acc[m][j] + bias[j];
  }
}

template <typename W>
using TileFn = void (*)(const float*, std::size_t, const W*, std::size_t, const float*, std::size_t, float*, std::size_t);
template <typename W>
constexpr TileFn<W> kTiles[kRows + 1] = {nullptr, micro_tile<1, W>, micro_tile<2, W>, micro_tile<3, W>,
                                         micro_tile<4, W>, micro_tile<5, W>, micro_tile<6, W>};

template <typename W>
void apply_panels(const W* panels, std::size_t out, std::size_t in, const float* x, std::size_t rows,
                  const float* bias, float* y) {
  const std::size_t count = (out + PackedLinear::kPanel - 1) / PackedLinear::kPanel;
  // Panel-outer: each panel (in * 16 weights) is read from memory once and stays in L1/L2 while
  // every row block uses it.
  for (std::size_t p = 0; p < count; ++p) {
    const W* panel = panels + p * in * PackedLinear::kPanel;
    const std::size_t col = p * PackedLinear::kPanel;
    const std::size_t width = std::min(PackedLinear::kPanel, out - col);
    for (std::size_t r = 0; r < rows; r += kRows) {
      const std::size_t m = std::min(kRows, rows - r);
      kTiles<W>[m](x + r * in, in, panel, in, bias + col, width, y + r * out + col, out);
    }
  }
}

template <typename W>
void pack(const float* w, std::size_t out, std::size_t in, std::vector<W>& panels) {
  const std::size_t count = (out + PackedLinear::kPanel - 1) / PackedLinear::kPanel;
  panels.assign(count * in * PackedLinear::kPanel, W(0));
  for (std::size_t p = 0; p < count; ++p) {
    for (std::size_t j = 0; j < PackedLinear::kPanel && p * PackedLinear::kPanel + j < out; ++j) {
      const float* src = w + (p * PackedLinear::kPanel + j) * in;
      W* dst = panels.data() + p * in * PackedLinear::kPanel + j;
      for (std::size_t k = 0; k < in; ++k) dst[k * PackedLinear::kPanel] = static_cast<W>(src[k]);
    }
  }
}

}  // namespace

PackedLinear::PackedLinear(const float* w, std::size_t out, std::size_t in, bool half) : out_(out), in_(in) {
  if (half) {
    pack(w, out, in, half_panels_);
  } else {
    pack(w, out, in, panels_);
  }
}

void PackedLinear::apply(const float* x, std::size_t rows, const float* bias, float* y) const {
  if (!half_panels_.empty()) {
    apply_panels(half_panels_.data(), out_, in_, x, rows, bias, y);
  } else {
    apply_panels(panels_.data(), out_, in_, x, rows, bias, y);
  }
}

}  // namespace tidegate::cache
