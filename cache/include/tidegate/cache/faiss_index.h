#pragma once
// VectorIndex on FAISS 1.7.3: exact IndexFlatIP or approximate IndexHNSWFlat, inner product on
// unit vectors. FAISS HNSW cannot delete, so removals are tombstones filtered at search time and
// compact() rebuilds without them; compact() builds outside the lock and replays a journal of
// the adds/removes that raced with it, so searches and adds never wait for a rebuild.
#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "tidegate/cache/cache_config.h"
#include "tidegate/encoder/vector_index.h"

namespace faiss {
struct Index;
}

namespace tidegate::cache {

class FaissVectorIndex final : public encoder::VectorIndex {
 public:
  FaissVectorIndex(std::size_t dim, const IndexConfig& config, IndexConfig::Type type);
  ~FaissVectorIndex() override;

  std::size_t dim() const override { return dim_; }
  std::size_t size() const override;  // live vectors
  void add(std::size_t n, const float* vectors, const std::int64_t* ids) override;
  bool remove(std::int64_t id) override;
  std::vector<encoder::SearchHit> search(std::size_t nq, const float* queries, std::size_t k) const override;

  IndexConfig::Type type() const;
  // Small HNSW searches run through hnsw_search.h (prefetching) unless this is set, which routes
  // them through FAISS's own IndexHNSW::search: for comparisons in tests and benchmarks.
  void use_faiss_search(bool on) { faiss_search_.store(on, std::memory_order_relaxed); }
  std::size_t tombstones() const;
  bool needs_compaction() const;
  // Rebuilds without tombstones, as `type`. Safe to call concurrently with everything else;
  // a second concurrent call returns at once.
  void compact(IndexConfig::Type type);
  void compact() { compact(type()); }

 private:
  std::unique_ptr<faiss::Index> build(IndexConfig::Type type) const;

  const std::size_t dim_;
  const IndexConfig config_;
  mutable std::shared_mutex mu_;
  IndexConfig::Type type_;
  std::unique_ptr<faiss::Index> index_;
  std::vector<std::int64_t> labels_;                      // faiss position -> id, -1 = tombstone
  std::unordered_map<std::int64_t, std::int64_t> where_;  // id -> faiss position
  std::size_t tombstones_ = 0;
  std::atomic<bool> faiss_search_{false};
  // While compact() builds, adds and removes are journaled here and replayed at the swap.
  bool compacting_ = false;
  std::vector<float> journal_vectors_;
  std::vector<std::int64_t> journal_ids_;
  std::vector<std::int64_t> journal_removed_;
};

}  // namespace tidegate::cache
