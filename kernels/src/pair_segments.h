#pragma once
// Internal, CUDA-free (the CPU tests check it against PairVerifier::encode): the token types of
// a sentence pair as the GPU verifier derives them from the ids alone.
#include <cstdint>

namespace tidegate::kernels::detail {

// "[CLS] a [SEP] b [SEP]": 0 through the first sep_id, 1 after it. That is what
// PairVerifier::encode assigns, because its word pieces never hold a special token.
inline void pair_segment_types(const std::int32_t* ids, std::size_t n, std::int32_t sep_id, std::int32_t* out) {
  std::int32_t type = 0;
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = type;
    if (ids[i] == sep_id) type = 1;
  }
}

}  // namespace tidegate::kernels::detail
