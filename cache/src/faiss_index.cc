#include "tidegate/cache/faiss_index.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/impl/HNSW.h>

#include <omp.h>

#include "fast_flat_ip.h"
#include "hnsw_search.h"

#include <algorithm>
#include <stdexcept>

namespace tidegate::cache {
namespace {

// FAISS parallelises over queries with OpenMP. For the cache's single-query calls, a parallel
// region costs more than it saves, and on a loaded machine its barrier waits on descheduled
// threads (milliseconds). Small calls therefore run on the calling thread alone; the OpenMP
// thread count is a per-thread setting, so other threads and bulk calls are unaffected.
class SerialOpenMP final {
 public:
  explicit SerialOpenMP(bool active) : saved_(active ? omp_get_max_threads() : 0) {
    if (saved_ > 1) omp_set_num_threads(1);
  }
  ~SerialOpenMP() {
    if (saved_ > 1) omp_set_num_threads(saved_);
  }
  SerialOpenMP(const SerialOpenMP&) = delete;
  SerialOpenMP& operator=(const SerialOpenMP&) = delete;

 private:
  int saved_;
};

constexpr std::size_t kSerialBelow = 16;

}  // namespace

FaissVectorIndex::FaissVectorIndex(std::size_t dim, const IndexConfig& config, IndexConfig::Type type)
    : dim_(dim), config_(config), type_(type), index_(build(type)) {}

FaissVectorIndex::~FaissVectorIndex() = default;

std::unique_ptr<faiss::Index> FaissVectorIndex::build(IndexConfig::Type type) const {
  if (type == IndexConfig::Type::kFlat)
    return std::make_unique<FastFlatIP>(static_cast<faiss::Index::idx_t>(dim_));
  // IndexHNSWFlat (or IndexHNSWSQ fp16) with a storage whose inner product uses the host's
  // vector unit (see fast_flat_ip.h).
  const auto d = static_cast<faiss::Index::idx_t>(dim_);
  faiss::Index* storage = config_.storage == IndexConfig::Storage::kFp16 ? static_cast<faiss::Index*>(new FastFp16IP(d))
                                                                        : new FastFlatIP(d);
  auto h = std::make_unique<faiss::IndexHNSW>(storage, config_.hnsw_m);
  h->own_fields = true;
  h->is_trained = true;
  h->hnsw.efConstruction = config_.ef_construction;
  h->hnsw.efSearch = config_.ef_search;
  return h;
}

std::size_t FaissVectorIndex::size() const {
  std::shared_lock lock(mu_);
  return where_.size();
}

IndexConfig::Type FaissVectorIndex::type() const {
  std::shared_lock lock(mu_);
  return type_;
}

std::size_t FaissVectorIndex::tombstones() const {
  std::shared_lock lock(mu_);
  return tombstones_;
}

bool FaissVectorIndex::needs_compaction() const {
  std::shared_lock lock(mu_);
  return !compacting_ && tombstones_ > 0 &&
         static_cast<double>(tombstones_) > config_.rebuild_fraction * static_cast<double>(labels_.size());
}

void FaissVectorIndex::add(std::size_t n, const float* vectors, const std::int64_t* ids) {
  if (n == 0) return;
  std::unique_lock lock(mu_);
  for (std::size_t i = 0; i < n; ++i)
    if (ids[i] < 0 || where_.count(ids[i])) throw std::invalid_argument("vector index: id negative or present");
  const auto base = static_cast<std::int64_t>(labels_.size());
  SerialOpenMP serial(n < kSerialBelow);
  index_->add(static_cast<faiss::Index::idx_t>(n), vectors);
  for (std::size_t i = 0; i < n; ++i) {
    labels_.push_back(ids[i]);
    where_[ids[i]] = base + static_cast<std::int64_t>(i);
  }
  if (compacting_) {
    journal_vectors_.insert(journal_vectors_.end(), vectors, vectors + n * dim_);
    journal_ids_.insert(journal_ids_.end(), ids, ids + n);
  }
}

bool FaissVectorIndex::remove(std::int64_t id) {
  std::unique_lock lock(mu_);
  const auto it = where_.find(id);
  if (it == where_.end()) return false;
  labels_[static_cast<std::size_t>(it->second)] = -1;
  where_.erase(it);
  ++tombstones_;
  if (compacting_) journal_removed_.push_back(id);
  return true;
}

std::vector<encoder::SearchHit> FaissVectorIndex::search(std::size_t nq, const float* queries, std::size_t k) const {
  std::vector<encoder::SearchHit> out(nq * k);
  if (nq == 0 || k == 0) return out;
  std::shared_lock lock(mu_);
  const auto total = labels_.size();
  if (total == 0 || where_.empty()) return out;
  // Ask for enough extra results that tombstones cannot crowd out k live ones (exact for
  // flat; for HNSW compaction keeps the tombstone count, and so this margin, bounded).
  const auto kk = std::min<std::size_t>(total, k + tombstones_);
  std::vector<float> dist(nq * kk);
  std::vector<faiss::Index::idx_t> pos(nq * kk);
  SerialOpenMP serial(nq < kSerialBelow);
  // Few queries: the prefetching loop on this thread. A batch keeps FAISS's loop, which spreads
  // the queries over OpenMP threads (with the same fast distance computer underneath).
  if (type_ == IndexConfig::Type::kHnsw && nq < kSerialBelow && !faiss_search_.load(std::memory_order_relaxed)) {
    const auto& hnsw = static_cast<const faiss::IndexHNSW&>(*index_);
    const auto ef = std::max<std::size_t>(static_cast<std::size_t>(config_.ef_search), kk);
    for (std::size_t q = 0; q < nq; ++q) {
      const auto found = hnsw_search_ip(hnsw, queries + q * dim_, kk, ef);
      for (std::size_t j = 0; j < kk; ++j) {
        dist[q * kk + j] = j < found.size() ? found[j].score : 0.f;
        pos[q * kk + j] = j < found.size() ? found[j].position : -1;
      }
    }
  } else if (type_ == IndexConfig::Type::kHnsw) {
    faiss::SearchParametersHNSW params;
    params.efSearch = std::max<int>(config_.ef_search, static_cast<int>(kk));
    index_->search(static_cast<faiss::Index::idx_t>(nq), queries, static_cast<faiss::Index::idx_t>(kk),
                   dist.data(), pos.data(), &params);
  } else {
    index_->search(static_cast<faiss::Index::idx_t>(nq), queries, static_cast<faiss::Index::idx_t>(kk),
                   dist.data(), pos.data());
  }
  for (std::size_t q = 0; q < nq; ++q) {
    std::size_t filled = 0;
    for (std::size_t j = 0; j < kk && filled < k; ++j) {
      const auto p = pos[q * kk + j];
      if (p < 0 || static_cast<std::size_t>(p) >= total) continue;
      const auto id = labels_[static_cast<std::size_t>(p)];
      if (id < 0) continue;
      out[q * k + filled++] = encoder::SearchHit{id, dist[q * kk + j]};
    }
  }
  return out;
}

void FaissVectorIndex::compact(IndexConfig::Type type) {
  std::vector<float> vectors;
  std::vector<std::int64_t> ids;
  {
    std::unique_lock lock(mu_);
    if (compacting_) return;
    compacting_ = true;
    journal_vectors_.clear();
    journal_ids_.clear();
    journal_removed_.clear();
    ids.reserve(where_.size());
    vectors.resize(where_.size() * dim_);
    std::size_t i = 0;
    for (std::size_t p = 0; p < labels_.size(); ++p) {
      if (labels_[p] < 0) continue;
      index_->reconstruct(static_cast<faiss::Index::idx_t>(p), vectors.data() + i * dim_);
      ids.push_back(labels_[p]);
      ++i;
    }
  }
  auto fresh = build(type);
  if (!ids.empty()) fresh->add(static_cast<faiss::Index::idx_t>(ids.size()), vectors.data());

  std::unique_lock lock(mu_);
  std::vector<std::int64_t> labels = std::move(ids);
  if (!journal_ids_.empty()) {
    fresh->add(static_cast<faiss::Index::idx_t>(journal_ids_.size()), journal_vectors_.data());
    labels.insert(labels.end(), journal_ids_.begin(), journal_ids_.end());
  }
  std::unordered_map<std::int64_t, std::int64_t> where;
  where.reserve(labels.size());
  for (std::size_t p = 0; p < labels.size(); ++p) where[labels[p]] = static_cast<std::int64_t>(p);
  std::size_t tomb = 0;
  for (const auto id : journal_removed_) {
    const auto it = where.find(id);
    if (it == where.end()) continue;
    labels[static_cast<std::size_t>(it->second)] = -1;
    where.erase(it);
    ++tomb;
  }
  index_ = std::move(fresh);
  labels_ = std::move(labels);
  where_ = std::move(where);
  tombstones_ = tomb;
  type_ = type;
  compacting_ = false;
  journal_vectors_.clear();
  journal_ids_.clear();
  journal_removed_.clear();
}

}  // namespace tidegate::cache
