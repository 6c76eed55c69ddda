#pragma once
// IndexFlatIP with a distance computer built for the CPU it runs on. Debian's FAISS 1.7.3 is
// compiled for baseline x86-64, so its inner product is 4-wide SSE without FMA, and HNSW spends
// most of its search and construction time there. This storage computes the same inner products
// with AVX-512 or AVX2 FMA where available (chosen at run time); everything else, including the
// graph and the on-disk layout of the vectors, is FAISS's own.
#include <faiss/IndexFlat.h>

namespace tidegate::cache {

class FastFlatIP final : public faiss::IndexFlatIP {
 public:
  explicit FastFlatIP(faiss::Index::idx_t d) : faiss::IndexFlatIP(d) {}
  faiss::FlatCodesDistanceComputer* get_FlatCodesDistanceComputer() const override;
};

// <a, b> over d floats, with the widest vector unit this CPU has.
float fast_inner_product(const float* a, const float* b, std::size_t d);

}  // namespace tidegate::cache
