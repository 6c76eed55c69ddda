// The packed dense kernels against a double-precision product, at shapes where their blocking
// changes: rows past a tile (12), outputs past a panel (16) or a pair of panels, inputs not a
// whole number of bf16 pairs. fp32 must be exact to rounding, bf16 within the error its
// roundings allow, which a kernel that reads a wrong weight or row would exceed.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "../src/intra_op.h"
#include "../src/packed_linear.h"

namespace tidegate::encoder {
namespace {

std::vector<float> random_values(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct Shape {
  std::size_t rows, out, in;
};

class PackedLinearShapes : public ::testing::TestWithParam<Shape> {};

void expect_within_rounding(DenseMath math, const Shape& s, IntraOpPool* pool) {
  const auto w = random_values(s.out * s.in, static_cast<std::uint32_t>(s.out * 7 + s.in));
  auto x = random_values(s.rows * s.in, static_cast<std::uint32_t>(s.rows * 13 + s.in));
  if (s.rows > 2) std::fill(x.begin() + static_cast<std::ptrdiff_t>(s.in), x.begin() + static_cast<std::ptrdiff_t>(2 * s.in), 0.f);
  x[0] *= 40.f;  // an outlier, as BERT's activations have
  const auto bias = random_values(s.out, 99);
  const PackedLinear packed(w.data(), s.out, s.in, math);
  ASSERT_EQ(packed.math(), math);
  std::vector<float> y(s.rows * s.out, -1.f);
  packed.apply(x.data(), s.rows, bias.data(), y.data(), pool);
  for (std::size_t r = 0; r < s.rows; ++r) {
    const float* xr = x.data() + r * s.in;
    double x_max = 0;
    for (std::size_t k = 0; k < s.in; ++k) x_max = std::max(x_max, std::fabs(double(xr[k])));
    for (std::size_t n = 0; n < s.out; ++n) {
      const float* wn = w.data() + n * s.in;
      double w_max = 0, want = bias[n], sum_x = 0, sum_w = 0, sum_xw = 0;
      for (std::size_t k = 0; k < s.in; ++k) {
        want += double(xr[k]) * wn[k];
        w_max = std::max(w_max, std::fabs(double(wn[k])));
        sum_x += std::fabs(double(xr[k]));
        sum_w += std::fabs(double(wn[k]));
        sum_xw += std::fabs(double(xr[k]) * wn[k]);
      }
      double bound = 1e-5 * (sum_xw + std::fabs(bias[n]) + 1);  // fp32 summation
      if (math != DenseMath::kFp32) bound += 2 * 0x1p-8 * sum_xw;  // two roundings to 8 bits of mantissa
      ASSERT_NEAR(y[r * s.out + n], want, bound) << "row " << r << " output " << n;
    }
  }
}

TEST_P(PackedLinearShapes, Fp32IsTheProduct) {
  expect_within_rounding(DenseMath::kFp32, GetParam(), nullptr);
  IntraOpPool pool(1);
  expect_within_rounding(DenseMath::kFp32, GetParam(), &pool);
}

TEST_P(PackedLinearShapes, Bf16WithinItsRounding) {
  if (!cpu_has_bf16_dot()) GTEST_SKIP() << "this CPU lacks AVX512-BF16";
  expect_within_rounding(DenseMath::kBf16, GetParam(), nullptr);
  IntraOpPool pool(1);
  expect_within_rounding(DenseMath::kBf16, GetParam(), &pool);
}

// The tile path pads K to 32 and rows to 16 with zeros; the shapes below cover whole and
// partial tiles of both, one and two row tiles, odd panel counts, products split across
// threads, and a batch too big for the thread's reused row block (300 x 1536).
TEST_P(PackedLinearShapes, Bf16OnMatrixTilesWithinItsRounding) {
  if (!cpu_has_bf16_tiles()) GTEST_SKIP() << "this CPU (or its kernel) offers no AMX-BF16 tiles";
  expect_within_rounding(DenseMath::kBf16Tiles, GetParam(), nullptr);
  IntraOpPool pool(1);
  expect_within_rounding(DenseMath::kBf16Tiles, GetParam(), &pool);
}

// Same operands, same roundings to bf16: the two bf16 kernels differ only in the order of fp32
// sums, so they agree far inside the bf16 bound (a misplaced tile row would not).
TEST(PackedLinear, TilesAgreeWithTheDotInstruction) {
  if (!cpu_has_bf16_tiles()) GTEST_SKIP() << "this CPU (or its kernel) offers no AMX-BF16 tiles";
  const std::size_t rows = 45, out = 80, in = 100;
  const auto w = random_values(out * in, 5);
  const auto x = random_values(rows * in, 6);
  const auto bias = random_values(out, 7);
  const PackedLinear dot(w.data(), out, in, DenseMath::kBf16), tiles(w.data(), out, in, DenseMath::kBf16Tiles);
  ASSERT_EQ(tiles.math(), DenseMath::kBf16Tiles);
  std::vector<float> a(rows * out), b(rows * out);
  dot.apply(x.data(), rows, bias.data(), a.data());
  tiles.apply(x.data(), rows, bias.data(), b.data());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4 * (std::fabs(a[i]) + 1)) << "element " << i;
}

// The tile configuration and registers are each thread's own: callers on several threads at
// once (the cache's embed workers) get what one caller alone gets, bit for bit.
TEST(PackedLinear, TilesOnConcurrentThreadsGiveTheSameFloats) {
  if (!cpu_has_bf16_tiles()) GTEST_SKIP() << "this CPU (or its kernel) offers no AMX-BF16 tiles";
  const std::size_t rows = 40, out = 96, in = 384;
  const auto w = random_values(out * in, 8);
  const auto bias = random_values(out, 9);
  const PackedLinear tiles(w.data(), out, in, DenseMath::kBf16Tiles);
  std::vector<std::vector<float>> x, want;
  for (std::uint32_t t = 0; t < 4; ++t) {
    x.push_back(random_values(rows * in, 10 + t));
    want.emplace_back(rows * out);
    tiles.apply(x[t].data(), rows, bias.data(), want[t].data());
  }
  std::vector<std::vector<float>> got(4, std::vector<float>(rows * out));
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round) tiles.apply(x[t].data(), rows, bias.data(), got[t].data());
    });
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < 4; ++t) EXPECT_EQ(got[t], want[t]) << "thread " << t;
}

INSTANTIATE_TEST_SUITE_P(Shapes, PackedLinearShapes,
                         ::testing::Values(Shape{1, 16, 384}, Shape{3, 20, 37}, Shape{12, 32, 64}, Shape{13, 48, 383},
                                           Shape{25, 384, 1536}, Shape{112, 1152, 384}, Shape{5, 7, 3},
                                           Shape{16, 32, 32}, Shape{33, 48, 64}, Shape{4, 1152, 384},
                                           Shape{300, 40, 1536}));

// A pool made and dropped before its helper threads got to run: each helper used to read the
// epoch when it started, so one that started after the destructor's bump waited for another,
// and the destructor waited for it (found by a kernel test whose small shapes never called the
// pool it made). A hang here ends at ctest's timeout.
TEST(IntraOpPool, DroppedBeforeItsHelpersStart) {
  for (int i = 0; i < 500; ++i) IntraOpPool pool(2);
  IntraOpPool used(1);
  std::atomic<int> parts{0};
  used.run(8, [&](std::size_t) { parts.fetch_add(1); });
  EXPECT_EQ(parts.load(), 8);
}

}  // namespace
}  // namespace tidegate::encoder
