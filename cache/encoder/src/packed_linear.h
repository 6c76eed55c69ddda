#pragma once
// y = x W^T + b for few rows (the tokens of short prompts). OpenBLAS repacks the whole weight
// matrix on every call, which costs more than the multiply when there are only a dozen rows;
// here the weights are packed once, at load, into column panels that the kernel streams once
// per call while the rows stay in registers.
#include <cstddef>
#include <vector>

namespace tidegate::cache {

class PackedLinear final {
 public:
  static constexpr std::size_t kPanel = 16;  // outputs per panel (one AVX-512 or two AVX2 registers)

  // w: [out, in] row-major (nn.Linear layout).
  PackedLinear(const float* w, std::size_t out, std::size_t in);

  // y[rows, out] = x[rows, in] * W^T + bias.
  void apply(const float* x, std::size_t rows, const float* bias, float* y) const;

  std::size_t out() const { return out_; }
  std::size_t in() const { return in_; }

 private:
  std::size_t out_, in_;
  std::vector<float> panels_;  // [ceil(out/kPanel)][in][kPanel], zero-padded
};

}  // namespace tidegate::cache
