#pragma once
// Inner-product search over unit vectors (so scores are cosine similarities).
// Implementations: FAISS flat and HNSW (CPU), and the CUDA flat index in kernels/.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tidegate::encoder {

struct SearchHit {
  std::int64_t id = -1;  // -1 when fewer than k results exist
  float score = 0;
};

class VectorIndex {
 public:
  virtual ~VectorIndex() = default;
  virtual std::size_t dim() const = 0;
  virtual std::size_t size() const = 0;
  // `vectors` holds n * dim() floats. Ids are caller-chosen and unique.
  virtual void add(std::size_t n, const float* vectors, const std::int64_t* ids) = 0;
  virtual bool remove(std::int64_t id) = 0;
  // Returns nq * k hits, best first per query.
  virtual std::vector<SearchHit> search(std::size_t nq, const float* queries, std::size_t k) const = 0;
};

}  // namespace tidegate::encoder
