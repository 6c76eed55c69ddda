// BERT forward pass on the CPU. Sequences are packed back to back (no padding rows): every
// dense layer is one sgemm over all tokens of the batch, and only attention looks at sequence
// boundaries, so a batch costs exactly its real tokens and padding can never leak into a row.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "intra_op.h"
#include "minilm_internal.h"
#include "minilm_ops.h"
#include "tidegate/common/cpu_clones.h"

namespace tidegate::encoder {
namespace {

// Attention for fewer tokens is a few microseconds: not worth waking the pool's helpers.
constexpr std::size_t kMinTokensToSplitAttention = 8;
// Parts handed out per pool thread: whoever finishes first takes the next, so a helper that
// woke late does not leave the caller waiting.
constexpr std::size_t kPartsPerThread = 3;
// A thread keeps its scratch up to this size (1 MiB: about 70 tokens); longer calls allocate.
constexpr std::size_t kReusedScratchFloats = std::size_t{1} << 18;

// out[rows, n] = in[rows, k] * W[n, k]^T + b (bias is written first, then accumulated into).
void linear(const float* in, std::size_t rows, std::size_t k, const float* w, const float* b, std::size_t n, float* out,
            const PackedLinear* packed, IntraOpPool* pool) {
  // Measured on MiniLM-L6: the packed kernel beats sgemm from 1 to 400+ tokens, because
  // sgemm repacks the weights every call; sgemm stays for callers without packed weights.
  if (packed != nullptr) {
    packed->apply(in, rows, b, out, pool);
    return;
  }
  for (std::size_t r = 0; r < rows; ++r) std::copy(b, b + n, out + r * n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(n),
              static_cast<int>(k), 1.f, in, static_cast<int>(k), w, static_cast<int>(k), 1.f, out,
              static_cast<int>(n));
}

// Exact (erf) GELU in place. erf comes from Abramowitz & Stegun 7.1.28, |error| <= 3e-7, which
// is below fp32 rounding of the activations here; unlike libm's erff it has no branches or
// calls, so the loop vectorises (it was 7% of a short prompt's time as scalar erff calls).
TIDEGATE_CPU_CLONES
void gelu_inplace(float* v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float x = v[i];
    const float z = std::fabs(x) * 0.70710678118654752f;
    float p = 1.f + z * (0.0705230784f + z * (0.0422820123f + z * (0.0092705272f +
                   z * (0.0001520143f + z * (0.0002765672f + z * 0.0000430638f)))));
    p *= p;  // p^16 by four squarings
    p *= p;
    p *= p;
    p *= p;
    const float erf_abs = 1.f - 1.f / p;
    const float erf = x < 0.f ? -erf_abs : erf_abs;
    v[i] = 0.5f * x * (1.f + erf);
  }
}

}  // namespace

std::vector<PackedMiniLMLayer> pack_minilm(const MiniLMWeights& w, DenseMath math) {
  const std::size_t H = w.config.hidden, I = w.config.intermediate;
  std::vector<PackedMiniLMLayer> layers;
  layers.reserve(w.layers.size());
  for (const auto& l : w.layers) {
    layers.push_back(PackedMiniLMLayer{PackedLinear(l.qkv_weight, 3 * H, H, math),
                                       PackedLinear(l.attn_out_weight, H, H, math),
                                       PackedLinear(l.ffn_in_weight, I, H, math),
                                       PackedLinear(l.ffn_out_weight, H, I, math)});
  }
  return layers;
}

std::vector<float> minilm_forward(const MiniLMWeights& w, const std::vector<std::vector<std::int32_t>>& ids) {
  return minilm_forward_checked(w, nullptr, ids, nullptr);
}

std::vector<float> minilm_forward_checked(const MiniLMWeights& w, const std::vector<PackedMiniLMLayer>* packed,
                                          const std::vector<std::vector<std::int32_t>>& ids,
                                          const std::function<void()>& checkpoint, IntraOpPool* pool) {
  return bert_forward(w, packed, ids, nullptr, BertPooling::kMeanL2, checkpoint, pool);
}

std::vector<float> bert_forward(const MiniLMWeights& w, const std::vector<PackedMiniLMLayer>* packed,
                                const std::vector<std::vector<std::int32_t>>& ids,
                                const std::vector<std::vector<std::int32_t>>* token_types, BertPooling pooling,
                                const std::function<void()>& checkpoint, IntraOpPool* pool) {
  const MiniLMConfig& c = w.config;
  if (token_types != nullptr && token_types->size() != ids.size())
    throw std::invalid_argument("bert: one token-type row per sequence");
  const std::size_t H = c.hidden, I = c.intermediate, heads = c.heads, dh = H / heads;
  std::vector<std::size_t> offsets(ids.size() + 1, 0);
  std::size_t max_len = 0;
  for (std::size_t b = 0; b < ids.size(); ++b) {
    const std::size_t n = ids[b].size();
    if (n == 0 || n > c.max_position) throw std::invalid_argument("minilm: sequence length out of range");
    if (token_types != nullptr && (*token_types)[b].size() != n)
      throw std::invalid_argument("bert: token types and ids differ in length");
    offsets[b + 1] = offsets[b] + n;
    max_len = std::max(max_len, n);
  }
  const std::size_t T = offsets.back();
  std::vector<float> out(ids.size() * H, 0.f);
  if (T == 0) return out;

  // Attention runs as (sequence, head) units split into `parts`, each with its own scratch.
  const std::size_t units = ids.size() * heads;
  const std::size_t parts =
      pool != nullptr && T >= kMinTokensToSplitAttention ? std::min(units, kPartsPerThread * pool->threads()) : 1;
  const std::size_t part_scratch = attend_scratch(max_len, dh);

  // One block of per-call scratch: x [T,H], qkv [T,3H], ctx [T,H], tmp [T,I], attention [parts][...].
  // Every part is written before it is read. Short prompts reuse the thread's block: zeroing a
  // fresh one cost more than their attention.
  const std::size_t scratch_floats = T * H + T * 3 * H + T * H + T * I + parts * part_scratch;
  thread_local std::vector<float> reused;
  std::vector<float> fresh;
  float* x = nullptr;
  if (scratch_floats <= kReusedScratchFloats) {
    if (reused.size() < scratch_floats) reused.resize(scratch_floats);
    x = reused.data();
  } else {
    fresh.resize(scratch_floats);
    x = fresh.data();
  }
  float* qkv = x + T * H;
  float* ctx = qkv + T * 3 * H;
  float* tmp = ctx + T * H;
  float* attention = tmp + T * I;

  for (std::size_t b = 0; b < ids.size(); ++b) {
    for (std::size_t p = 0; p < ids[b].size(); ++p) {
      const std::int32_t id = ids[b][p];
      if (id < 0 || static_cast<std::size_t>(id) >= c.vocab_size) throw std::invalid_argument("minilm: token id out of range");
      const float* we = w.word_embeddings + static_cast<std::size_t>(id) * H;
      const float* pe = w.position_embeddings + p * H;
      const std::int32_t type = token_types != nullptr ? (*token_types)[b][p] : 0;
      if (type < 0 || static_cast<std::size_t>(type) >= c.type_vocab_size)
        throw std::invalid_argument("bert: token type out of range");
      const float* te = w.token_type_embeddings + static_cast<std::size_t>(type) * H;
      float* row = x + (offsets[b] + p) * H;
      for (std::size_t i = 0; i < H; ++i) row[i] = we[i] + pe[i] + te[i];
    }
  }
  add_layer_norm(x, nullptr, T, H, w.embed_ln_gamma, w.embed_ln_beta, c.layer_norm_eps);

  const float scale = 1.f / std::sqrt(static_cast<float>(dh));
  const std::size_t B = ids.size();
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const MiniLMLayerWeights& lw = w.layers[l];
    const PackedMiniLMLayer* pl = packed ? &(*packed)[l] : nullptr;
    if (checkpoint) checkpoint();
    // Only the [CLS] rows leave the last layer when they are all that is pooled: that layer
    // still reads every token's keys and values, but computes one query per sequence, and the
    // projection, feed-forward and norms after it run on B rows instead of T. Rows are computed
    // independently, so the [CLS] values are those of the whole layer: the same floats with
    // packed weights and sequences up to 64 tokens, equal to fp32 rounding where OpenBLAS runs
    // (tested both ways).
    const bool cls_only = pooling == BertPooling::kFirstToken && l + 1 == w.layers.size();
    const std::size_t rows = cls_only ? B : T;
    linear(x, T, H, lw.qkv_weight, lw.qkv_bias, 3 * H, qkv, pl ? &pl->qkv : nullptr, pool);
    const auto attend_units = [&](std::size_t part) {
      for (std::size_t u = units * part / parts; u < units * (part + 1) / parts; ++u) {
        const std::size_t b = u / heads, h = u % heads;
        const std::size_t n = offsets[b + 1] - offsets[b];
        const float* base = qkv + offsets[b] * 3 * H;
        attend(base + h * dh, base + H + h * dh, base + 2 * H + h * dh, 3 * H, n, cls_only ? 1 : n, dh, scale,
               attention + part * part_scratch, ctx + (cls_only ? b : offsets[b]) * H + h * dh, H);
      }
    };
    if (parts > 1)
      pool->run(parts, attend_units);
    else
      attend_units(0);
    if (cls_only) {
      // The residual stream keeps the [CLS] rows only, packed to the front (row b moves from
      // offsets[b] >= b, so no row is overwritten before it is read).
      for (std::size_t b = 1; b < B; ++b) std::copy(x + offsets[b] * H, x + offsets[b] * H + H, x + b * H);
    }
    linear(ctx, rows, H, lw.attn_out_weight, lw.attn_out_bias, H, tmp, pl ? &pl->attn_out : nullptr, pool);
    add_layer_norm(x, tmp, rows, H, lw.attn_ln_gamma, lw.attn_ln_beta, c.layer_norm_eps);

    linear(x, rows, H, lw.ffn_in_weight, lw.ffn_in_bias, I, tmp, pl ? &pl->ffn_in : nullptr, pool);
    gelu_inplace(tmp, rows * I);
    linear(tmp, rows, I, lw.ffn_out_weight, lw.ffn_out_bias, H, ctx, pl ? &pl->ffn_out : nullptr, pool);
    add_layer_norm(x, ctx, rows, H, lw.ffn_ln_gamma, lw.ffn_ln_beta, c.layer_norm_eps);
  }

  if (pooling != BertPooling::kMeanL2) {
    // kFirstToken left the [CLS] rows packed at the front; the reference pass has them in place.
    const bool packed_front = pooling == BertPooling::kFirstToken;
    for (std::size_t b = 0; b < B; ++b) {
      const float* row = x + (packed_front ? b : offsets[b]) * H;
      std::copy(row, row + H, out.data() + b * H);
    }
    return out;
  }
  // Mean pooling over every token of the sequence ([CLS] and [SEP] included, as the attention
  // mask does in sentence-transformers), then L2 normalisation.
  for (std::size_t b = 0; b < B; ++b) {
    float* o = out.data() + b * H;
    for (std::size_t t = offsets[b]; t < offsets[b + 1]; ++t) {
      for (std::size_t i = 0; i < H; ++i) o[i] += x[t * H + i];
    }
    l2_normalize(o, H);
  }
  return out;
}

bool l2_normalize(float* v, std::size_t dim) {
  double sum = 0.0;
  for (std::size_t i = 0; i < dim; ++i) sum += static_cast<double>(v[i]) * v[i];
  if (!(sum > 0.0) || !std::isfinite(sum)) return false;
  const float inv = static_cast<float>(1.0 / std::sqrt(sum));
  for (std::size_t i = 0; i < dim; ++i) v[i] *= inv;
  return true;
}

}  // namespace tidegate::encoder
