#pragma once
// The parts of a BERT layer that are not dense products: layer norm and attention. They are a
// third of a 31-token prompt's time when left to scalar code (the dense products run at the
// core's bf16 peak), so they are written for the vector unit, built for x86-64-v4 and v3 with
// a baseline fallback chosen at run time.
#include <cstddef>

namespace tidegate::encoder {

// x[r] = LayerNorm(x[r] + residual[r]) for each of `rows` rows of `dim`; residual may be null.
void add_layer_norm(float* x, const float* residual, std::size_t rows, std::size_t dim, const float* gamma,
                    const float* beta, float eps);

// Floats of scratch attend() needs for a sequence of n tokens and head size dh.
constexpr std::size_t attend_scratch(std::size_t n, std::size_t dh) { return n * n + dh * ((n + 15) / 16 * 16); }

// One head of one sequence: ctx = softmax(scale * q k^T) v for the first `rows` (<= n) query
// rows, over all n keys and values. q/k/v rows have stride `ld`, ctx rows stride `ldc`. A row's
// result does not depend on `rows`: the pair verifier's last layer asks for its [CLS] row only.
void attend(const float* q, const float* k, const float* v, std::size_t ld, std::size_t n, std::size_t rows,
            std::size_t dh, float scale, float* scratch, float* ctx, std::size_t ldc);

}  // namespace tidegate::encoder
