#pragma once
// Shared between the encoder's translation units; not part of the public API.
#include <functional>

#include "tidegate/cache/minilm.h"

namespace tidegate::cache {

// minilm_forward with a hook called before each layer (the embedder checks its deadline there).
std::vector<float> minilm_forward_checked(const MiniLMWeights& w, const std::vector<std::vector<std::int32_t>>& ids,
                                          const std::function<void()>& checkpoint);

// Scales v to unit length; an all-zero vector stays zero and the result is false.
bool l2_normalize(float* v, std::size_t dim);

}  // namespace tidegate::cache
