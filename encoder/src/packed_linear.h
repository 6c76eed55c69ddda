#pragma once
// y = x W^T + b for few rows (the tokens of short prompts). OpenBLAS repacks the whole weight
// matrix on every call, which costs more than the multiply when there are only a dozen rows;
// here the weights are packed once, at load, into column panels that the kernel streams once
// per call while the rows stay in registers.
//
// Two precisions. fp32 everywhere. bf16 (weights and the row operand rounded to bfloat16,
// products summed in fp32 by AVX512-BF16's dot instruction) where the CPU has it: twice the
// multiply-adds per instruction and half the weight bytes, which is what a short prompt's
// latency is made of (measured in bench/encoder; accuracy against sentence-transformers is
// tested in cache/encoder/tests/minilm_test.cc).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tidegate::encoder {

class IntraOpPool;

// kBf16Tiles is kBf16's arithmetic (bf16 operands, fp32 sums) on the CPU's matrix tiles (AMX,
// packed_linear_tiles.h); the sums run in another order, so results differ from kBf16's in the
// last bits of fp32.
enum class DenseMath { kFp32, kBf16, kBf16Tiles };

// True when this CPU can run DenseMath::kBf16.
bool cpu_has_bf16_dot();
// True when this CPU (and its kernel) can run DenseMath::kBf16Tiles.
bool cpu_has_bf16_tiles();

class PackedLinear final {
 public:
  static constexpr std::size_t kPanel = 16;  // outputs per panel (one AVX-512 or two AVX2 registers)

  // w: [out, in] row-major (nn.Linear layout). kBf16Tiles on a CPU without tiles falls back to
  // kBf16, and kBf16 on a CPU without it to kFp32; math() says which one was taken.
  PackedLinear(const float* w, std::size_t out, std::size_t in, DenseMath math = DenseMath::kFp32);

  // y[rows, out] = x[rows, in] * W^T + bias. With a pool, large products are split by
  // output panels across its threads (each panel is computed exactly as without one).
  void apply(const float* x, std::size_t rows, const float* bias, float* y, IntraOpPool* pool = nullptr) const;

  std::size_t out() const { return out_; }
  std::size_t in() const { return in_; }
  DenseMath math() const { return math_; }

 private:
  void apply_bf16(const float* x, std::size_t rows, const float* bias, float* y, IntraOpPool* pool) const;

  std::size_t out_, in_;
  DenseMath math_;
  std::vector<float> panels_;           // fp32: [ceil(out/kPanel)][in][kPanel], zero-padded
  std::size_t pairs_ = 0;               // bf16 pair rows per panel: ceil(in/2), or in rounded up to a tile's 32 / 2
  std::vector<std::uint16_t> bf16_;     // bf16: [ceil(out/kPanel)][pairs_][kPanel][2], zero-padded
};

}  // namespace tidegate::encoder
