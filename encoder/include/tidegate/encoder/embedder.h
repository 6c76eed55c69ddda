#pragma once
// Turns texts into unit-length vectors. Implementations: minilm (native C++ BERT), openai
// (remote /v1/embeddings), hash (deterministic n-gram hashing), and the GPU encoder in kernels/.
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace tidegate::encoder {

class Embedder {
 public:
  virtual ~Embedder() = default;
  virtual std::size_t dim() const = 0;
  virtual std::string name() const = 0;
  // Blocking; called from the cache's worker pool, never from an event loop. Returns
  // texts.size() * dim() floats, each row L2-normalised. Throws on failure or past deadline.
  virtual std::vector<float> embed(const std::vector<std::string>& texts,
                                   std::chrono::steady_clock::time_point deadline) = 0;
};

}  // namespace tidegate::encoder
