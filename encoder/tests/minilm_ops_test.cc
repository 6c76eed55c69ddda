// The encoder's vectorised layer norm and attention against plain double-precision loops, at
// the sequence lengths where their blocking changes (16-token blocks, the 64-token switch to
// sgemm) and at head sizes the fast path does not take.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "../src/minilm_ops.h"

namespace tidegate::encoder {
namespace {

std::vector<float> random_values(std::size_t n, std::uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// ctx = softmax(scale q k^T) v in double, rows of q/k/v `ld` apart.
std::vector<double> naive_attention(const float* q, const float* k, const float* v, std::size_t ld, std::size_t n,
                                    std::size_t dh, float scale) {
  std::vector<double> ctx(n * dh, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<double> s(n);
    double mx = -1e300;
    for (std::size_t j = 0; j < n; ++j) {
      double dot = 0.0;
      for (std::size_t d = 0; d < dh; ++d) dot += static_cast<double>(q[i * ld + d]) * k[j * ld + d];
      s[j] = dot * scale;
      mx = std::max(mx, s[j]);
    }
    double sum = 0.0;
    for (auto& x : s) sum += (x = std::exp(x - mx));
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t d = 0; d < dh; ++d) ctx[i * dh + d] += s[j] / sum * v[j * ld + d];
  }
  return ctx;
}

class MiniLMOpsAttend : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t>> {};

TEST_P(MiniLMOpsAttend, MatchesDoublePrecisionLoops) {
  const auto [n, dh] = GetParam();
  // One head inside a fused [n, 3 * heads * dh] QKV block, as the forward pass lays it out.
  const std::size_t heads = 3, ld = 3 * heads * dh, head = 1;
  const auto qkv = random_values(n * ld, static_cast<std::uint32_t>(n * 131 + dh), 2.f);
  const float* q = qkv.data() + head * dh;
  const float* k = q + heads * dh;
  const float* v = k + heads * dh;
  const float scale = 1.f / std::sqrt(static_cast<float>(dh));
  const std::size_t ldc = heads * dh;
  std::vector<float> ctx(n * ldc, -7.f), scratch(attend_scratch(n, dh), 123.f);
  attend(q, k, v, ld, n, n, dh, scale, scratch.data(), ctx.data() + head * dh, ldc);
  const auto want = naive_attention(q, k, v, ld, n, dh, scale);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t d = 0; d < dh; ++d) {
      ASSERT_NEAR(ctx[i * ldc + head * dh + d], want[i * dh + d], 2e-5) << "row " << i << " dim " << d;
    }
    // Other heads' columns are left alone.
    EXPECT_EQ(ctx[i * ldc], -7.f);
    EXPECT_EQ(ctx[i * ldc + ldc - 1], -7.f);
  }
}

// The pair verifier's last layer asks for the first query rows only: they must be the values the
// whole head gives them, and the rows not asked for are not written. On the register-tiled path
// (up to 64 tokens, a head of whole 16-lane blocks) they are the very same floats; elsewhere
// OpenBLAS's sgemm runs, which picks its kernels by the row count (past 64 tokens everywhere; on
// some CPUs at any length), so they agree to fp32 rounding.
TEST_P(MiniLMOpsAttend, FirstRowsAreThoseOfTheWholeHead) {
  const auto [n, dh] = GetParam();
  const std::size_t ld = 3 * dh;
  const auto qkv = random_values(n * ld, static_cast<std::uint32_t>(n * 17 + dh), 2.f);
  const float scale = 1.f / std::sqrt(static_cast<float>(dh));
  std::vector<float> scratch(attend_scratch(n, dh));
  std::vector<float> whole(n * dh, -7.f);
  attend(qkv.data(), qkv.data() + dh, qkv.data() + 2 * dh, ld, n, n, dh, scale, scratch.data(), whole.data(), dh);
  for (const std::size_t rows : {std::size_t{1}, std::size_t{2}}) {
    if (rows > n) continue;
    std::vector<float> part(n * dh, -7.f);
    attend(qkv.data(), qkv.data() + dh, qkv.data() + 2 * dh, ld, n, rows, dh, scale, scratch.data(), part.data(), dh);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t d = 0; d < dh; ++d) {
        if (i < rows && n <= 64 && dh % 16 == 0)
          ASSERT_EQ(part[i * dh + d], whole[i * dh + d]) << "rows " << rows << " row " << i << " dim " << d;
        else if (i < rows)
          ASSERT_NEAR(part[i * dh + d], whole[i * dh + d], 1e-5) << "rows " << rows << " row " << i << " dim " << d;
        else
          ASSERT_EQ(part[i * dh + d], -7.f) << "row " << i << " was not asked for";
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MiniLMOpsAttend,
                         ::testing::Combine(::testing::Values(1, 2, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100),
                                            ::testing::Values(32, 64, 24)));

TEST(MiniLMOps, AddLayerNormMatchesDoublePrecision) {
  for (const std::size_t dim : {384, 37, 16, 5}) {
    const std::size_t rows = 3;
    auto x = random_values(rows * dim, 1 + static_cast<std::uint32_t>(dim), 3.f);
    const auto residual = random_values(rows * dim, 2 + static_cast<std::uint32_t>(dim));
    const auto gamma = random_values(dim, 3), beta = random_values(dim, 4);
    for (const bool with_residual : {true, false}) {
      auto got = x;
      add_layer_norm(got.data(), with_residual ? residual.data() : nullptr, rows, dim, gamma.data(), beta.data(),
                     1e-12f);
      for (std::size_t r = 0; r < rows; ++r) {
        std::vector<double> row(dim);
        double mean = 0.0, var = 0.0;
        for (std::size_t i = 0; i < dim; ++i) {
          row[i] = x[r * dim + i] + (with_residual ? residual[r * dim + i] : 0.f);
          mean += row[i];
        }
        mean /= static_cast<double>(dim);
        for (double v : row) var += (v - mean) * (v - mean);
        var /= static_cast<double>(dim);
        for (std::size_t i = 0; i < dim; ++i) {
          const double want = (row[i] - mean) / std::sqrt(var + 1e-12) * gamma[i] + beta[i];
          ASSERT_NEAR(got[r * dim + i], want, 1e-4) << "dim " << dim << " row " << r << " col " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tidegate::encoder
