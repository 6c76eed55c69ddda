// Each fused kernel against its CPU reference on fp16-exact inputs. Tolerances: outputs stored
// as fp16 are allowed 2 fp16 ulps relative (rtol 2e-3) plus a small absolute floor; fp32 outputs
// (pooling) 1e-4 absolute; pure data movement must be exact.
#include <cmath>

#include "gpu_test_util.h"
#include "ops.h"
#include "tidegate/kernels/reference.h"

namespace tidegate::kernels {
namespace {

using namespace testing;

TEST(GpuOps, ResidualLayerNormWithBiasInPlace) {
  TG_SKIP_WITHOUT_GPU();
  const int rows = 37, h = 384;
  const auto x = random_vector(rows * h, 1, -3, 3), res = random_vector(rows * h, 2, -3, 3);
  const auto bias = random_vector(h, 3), gamma = random_vector(h, 4, 0.5f, 1.5f), beta = random_vector(h, 5);
  std::vector<float> want(rows * h);
  ref::residual_layernorm(x.data(), bias.data(), res.data(), gamma.data(), beta.data(), rows, h, 1e-12f, want.data());
  auto dx = to_device_half(x), dres = to_device_half(res);
  auto db = to_device(bias), dg = to_device(gamma), dbeta = to_device(beta);
  detail::launch_residual_layernorm(dx.get(), db.get(), dres.get(), dg.get(), dbeta.get(), 1e-12f, rows, h, dres.get(),
                                    nullptr);  // out aliases the residual, as in the encoder
  TG_CUDA_CHECK(cudaDeviceSynchronize());
  expect_close(from_device_half(dres, rows * h), want, 2e-3f, 2e-3f, "residual_layernorm");
}

// With types null every token adds type row 0 (a single sentence, the embedder); with types
// each token adds its own row (a sentence pair, the verifier).
TEST(GpuOps, EmbeddingGatherAndLayerNorm) {
  TG_SKIP_WITHOUT_GPU();
  const int batch = 3, len = 7, h = 384, vocab = 50, type_vocab = 2;
  const auto word = random_vector(vocab * h, 1), pos = random_vector(len * h, 2),
             type_table = random_vector(type_vocab * h, 3);
  const auto gamma = random_vector(h, 4, 0.5f, 1.5f), beta = random_vector(h, 5);
  std::vector<std::int32_t> ids(batch * len), types(batch * len);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<std::int32_t>((i * 13) % vocab);
    types[i] = static_cast<std::int32_t>(i % len > 3);  // [CLS] a a [SEP] | b b [SEP]
  }
  auto dids = to_device(ids), dtypes = to_device(types);
  auto dw = to_device_half(word), dp = to_device_half(pos), dt = to_device_half(type_table);
  auto dg = to_device(gamma), db = to_device(beta);
  for (const bool typed : {false, true}) {
    std::vector<float> x(batch * len * h), res(batch * len * h), want(batch * len * h);
    for (int t = 0; t < batch * len; ++t)
      for (int c = 0; c < h; ++c) {
        x[t * h + c] = word[ids[t] * h + c];
        res[t * h + c] = pos[(t % len) * h + c] + type_table[(typed ? types[t] : 0) * h + c];
      }
    ref::residual_layernorm(x.data(), nullptr, res.data(), gamma.data(), beta.data(), batch * len, h, 1e-12f,
                            want.data());
    detail::DeviceBuffer<__half> out(batch * len * h);
    detail::launch_embed_layernorm(dids.get(), typed ? dtypes.get() : nullptr, batch, len, h, dw.get(), dp.get(),
                                   dt.get(), dg.get(), db.get(), 1e-12f, out.get(), nullptr);
    TG_CUDA_CHECK(cudaDeviceSynchronize());
    expect_close(from_device_half(out, batch * len * h), want, 2e-3f, 2e-3f,
                 typed ? "embed_layernorm (pair)" : "embed_layernorm");
  }
}

TEST(GpuOps, BiasGelu) {
  TG_SKIP_WITHOUT_GPU();
  const int rows = 19, n = 1536;
  const auto x = random_vector(rows * n, 1, -5, 5), bias = random_vector(n, 2);
  std::vector<float> want = x;
  ref::bias_gelu(want.data(), bias.data(), rows, n);
  auto dx = to_device_half(x);
  auto db = to_device(bias);
  detail::launch_bias_gelu(dx.get(), db.get(), rows, n, nullptr);
  TG_CUDA_CHECK(cudaDeviceSynchronize());
  expect_close(from_device_half(dx, rows * n), want, 1e-3f, 2e-3f, "bias_gelu");
}

TEST(GpuOps, MaskedSoftmaxHonoursLengthsAndScale) {
  TG_SKIP_WITHOUT_GPU();
  const int batch = 4, heads = 3, len = 70;  // len > 64: several values per lane
  const std::vector<std::int32_t> lengths = {70, 1, 33, 64};
  const auto scores = random_vector(batch * heads * len * len, 1, -8, 8);
  const float scale = 0.125f;
  std::vector<float> want = scores;
  ref::masked_softmax(want.data(), batch, heads, len, lengths.data(), scale);
  auto ds = to_device(scores);
  auto dl = to_device(lengths);
  detail::DeviceBuffer<__half> probs(scores.size());
  detail::launch_masked_softmax(ds.get(), dl.get(), batch, heads, len, scale, probs.get(), nullptr);
  TG_CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = from_device_half(probs, scores.size());
  expect_close(got, want, 1e-3f, 2e-3f, "masked_softmax");
  for (int h = 0; h < heads; ++h)  // batch 1 has one valid key: every masked key exactly 0
    for (int j = 1; j < len; ++j) ASSERT_EQ(got[((1 * heads + h) * len + 5) * len + j], 0.f);
}

TEST(GpuOps, QkvSplitAndMergeHeadsAreExactPermutations) {
  TG_SKIP_WITHOUT_GPU();
  const int batch = 2, len = 5, heads = 12, hd = 32, h = heads * hd;
  const auto qkv = random_vector(batch * len * 3 * h, 1);
  const std::vector<float> bias(3 * h, 0.f);
  auto dqkv = to_device_half(qkv);
  auto db = to_device(bias);
  detail::DeviceBuffer<__half> q(batch * len * h), k(batch * len * h), v(batch * len * h), merged(batch * len * h);
  detail::launch_qkv_split(dqkv.get(), db.get(), batch, len, heads, hd, q.get(), k.get(), v.get(), nullptr);
  detail::launch_merge_heads(k.get(), batch, heads, len, hd, merged.get(), nullptr);
  TG_CUDA_CHECK(cudaDeviceSynchronize());
  const auto hq = from_device_half(q, batch * len * h), hm = from_device_half(merged, batch * len * h);
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < len; ++i)
      for (int c = 0; c < h; ++c) {
        const int token = b * len + i, head = c / hd, d = c % hd;
        ASSERT_EQ(hq[((b * heads + head) * len + i) * hd + d], qkv[token * 3 * h + c]);
        ASSERT_EQ(hm[token * h + c], qkv[token * 3 * h + h + c]);  // merge(split(k)) == k
      }
}

TEST(GpuOps, MeanPoolL2IgnoresPadding) {
  TG_SKIP_WITHOUT_GPU();
  const int batch = 5, len = 9, h = 384;
  const std::vector<std::int32_t> lengths = {9, 1, 4, 8, 2};
  const auto hidden = random_vector(batch * len * h, 1, -2, 2);
  std::vector<float> want(batch * h);
  ref::mean_pool_l2(hidden.data(), batch, len, h, lengths.data(), want.data());
  auto dh = to_device_half(hidden);
  auto dl = to_device(lengths);
  detail::DeviceBuffer<float> out(batch * h);
  detail::launch_mean_pool_l2(dh.get(), dl.get(), batch, len, h, out.get(), nullptr);
  TG_CUDA_CHECK(cudaDeviceSynchronize());
  expect_close(from_device(out, batch * h), want, 1e-4f, 1e-4f, "mean_pool_l2");
}

}  // namespace
}  // namespace tidegate::kernels
