#pragma once
// Flat storages for FAISS's HNSW with distance computers built for the CPU they run on.
// Debian's FAISS 1.7.3 is compiled for baseline x86-64: its inner product is 4-wide SSE without
// FMA and its fp16 decoding is scalar, and HNSW spends most of its search and construction
// time there. These compute the same inner products with AVX-512 or AVX2 (+F16C) where
// available, chosen at run time; the graph, the codecs and the code layout are FAISS's own.
//   FastFlatIP:  fp32 vectors (IndexFlatIP), exact scores; also the cache's flat index.
//   FastFp16IP:  vectors stored as IEEE fp16 (IndexScalarQuantizer QT_fp16): half the memory
//                and half the bytes per distance, which is what a search over a million
//                vectors waits on; scores are off by ~1e-4 (stored values rounded to 11 bits).
#include <faiss/IndexFlat.h>
#include <faiss/IndexScalarQuantizer.h>

#include <cstdint>

namespace tidegate::cache {

class FastFlatIP final : public faiss::IndexFlatIP {
 public:
  explicit FastFlatIP(faiss::Index::idx_t d) : faiss::IndexFlatIP(d) {}
  faiss::FlatCodesDistanceComputer* get_FlatCodesDistanceComputer() const override;
  // Few queries: an exact scan with the kernels above (FAISS's is SSE for fewer than 20
  // queries). Larger batches keep FAISS's sgemm path, which OpenBLAS already vectorises.
  void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
              const faiss::SearchParameters* params = nullptr) const override;
};

class FastFp16IP final : public faiss::IndexScalarQuantizer {
 public:
  explicit FastFp16IP(faiss::Index::idx_t d)
      : faiss::IndexScalarQuantizer(static_cast<int>(d), faiss::ScalarQuantizer::QT_fp16,
                                    faiss::METRIC_INNER_PRODUCT) {}
  faiss::FlatCodesDistanceComputer* get_FlatCodesDistanceComputer() const override;
};

// <a, b> over d floats, with the widest vector unit this CPU has.
float fast_inner_product(const float* a, const float* b, std::size_t d);
// <a, b> with b as d IEEE fp16 values.
float fast_inner_product_f16(const float* a, const std::uint16_t* b, std::size_t d);
// <a, b> with both as fp16.
float fast_inner_product_f16f16(const std::uint16_t* a, const std::uint16_t* b, std::size_t d);

}  // namespace tidegate::cache
