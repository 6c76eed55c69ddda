#include "hnsw_search.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/impl/HNSW.h>
#include <xmmintrin.h>

#include <algorithm>
#include <queue>
#include <stdexcept>

#include "fast_flat_ip.h"

namespace tidegate::cache {
namespace {

// Visited marks as epochs, so a search never clears a table the size of the index; one table
// per thread, grown to the largest index that thread has searched.
class VisitedEpochs final {
 public:
  void begin(std::size_t n) {
    if (marks_.size() < n) marks_.resize(n, 0);
    if (++epoch_ == 0) {  // wrapped: old marks could collide with the new epoch
      std::fill(marks_.begin(), marks_.end(), 0);
      epoch_ = 1;
    }
  }
  // True the first time `i` is seen in this search.
  bool visit(std::size_t i) {
    if (marks_[i] == epoch_) return false;
    marks_[i] = epoch_;
    return true;
  }

 private:
  std::vector<std::uint16_t> marks_;
  std::uint16_t epoch_ = 0;
};

void prefetch_vector(const std::uint8_t* v, std::size_t bytes) {
  const auto* p = reinterpret_cast<const char*>(v);
  for (std::size_t off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}

struct Best {  // max-heap on score: the most promising candidate first
  bool operator()(const ScoredPosition& a, const ScoredPosition& b) const { return a.score < b.score; }
};
struct Worst {  // min-heap on score: the weakest kept result first
  bool operator()(const ScoredPosition& a, const ScoredPosition& b) const { return a.score > b.score; }
};

template <typename Score>
std::vector<ScoredPosition> search(const faiss::IndexHNSW& index, const std::uint8_t* codes, std::size_t code_size,
                                   std::size_t k, std::size_t ef, Score score) {
  const faiss::HNSW& g = index.hnsw;
  const auto n = static_cast<std::size_t>(index.ntotal);
  ef = std::max(ef, k);
  auto at = [&](std::int64_t i) { return codes + static_cast<std::size_t>(i) * code_size; };

  // Greedy descent: on each upper level move to the best neighbour until none is better.
  std::int64_t cur = g.entry_point;
  float cur_score = score(cur);
  for (int level = g.max_level; level > 0; --level) {
    for (bool moved = true; moved;) {
      moved = false;
      std::size_t b = 0, e = 0;
      g.neighbor_range(cur, level, &b, &e);
      for (std::size_t j = b; j < e && g.neighbors[j] >= 0; ++j) prefetch_vector(at(g.neighbors[j]), 128);
      for (std::size_t j = b; j < e; ++j) {
        const std::int64_t v = g.neighbors[j];
        if (v < 0) break;
        const float s = score(v);
        if (s > cur_score) {
          cur_score = s;
          cur = v;
          moved = true;
        }
      }
    }
  }

  // Level 0: beam search of width ef.
  thread_local VisitedEpochs visited;
  visited.begin(n);
  visited.visit(static_cast<std::size_t>(cur));
  std::priority_queue<ScoredPosition, std::vector<ScoredPosition>, Best> candidates;
  std::priority_queue<ScoredPosition, std::vector<ScoredPosition>, Worst> results;
  candidates.push({cur_score, cur});
  results.push({cur_score, cur});
  std::vector<std::int64_t> fresh;
  while (!candidates.empty()) {
    const ScoredPosition c = candidates.top();
    if (results.size() >= ef && c.score < results.top().score) break;
    candidates.pop();
    std::size_t b = 0, e = 0;
    g.neighbor_range(c.position, 0, &b, &e);
    fresh.clear();
    for (std::size_t j = b; j < e; ++j) {
      const std::int64_t v = g.neighbors[j];
      if (v < 0) break;
      if (visited.visit(static_cast<std::size_t>(v))) fresh.push_back(v);
    }
    // Requests for every new neighbour go out before the first is scored: their misses overlap
    // instead of queueing behind each other.
    for (const auto v : fresh) prefetch_vector(at(v), code_size);
    for (const auto v : fresh) {
      const float s = score(v);
      if (results.size() < ef || s > results.top().score) {
        candidates.push({s, v});
        results.push({s, v});
        if (results.size() > ef) results.pop();
      }
    }
  }
  while (results.size() > k) results.pop();
  std::vector<ScoredPosition> out(results.size());
  for (std::size_t i = out.size(); i-- > 0;) {
    out[i] = results.top();
    results.pop();
  }
  return out;
}

}  // namespace

std::vector<ScoredPosition> hnsw_search_ip(const faiss::IndexHNSW& index, const float* query, std::size_t k,
                                           std::size_t ef) {
  if (index.ntotal == 0 || k == 0 || index.hnsw.entry_point < 0) return {};
  const auto d = static_cast<std::size_t>(index.d);
  if (const auto* half = dynamic_cast<const FastFp16IP*>(index.storage)) {
    const auto* base = reinterpret_cast<const std::uint16_t*>(half->codes.data());
    return search(index, half->codes.data(), half->code_size, k, ef,
                  [=](std::int64_t i) { return fast_inner_product_f16(query, base + static_cast<std::size_t>(i) * d, d); });
  }
  if (const auto* full = dynamic_cast<const FastFlatIP*>(index.storage)) {
    const float* base = full->get_xb();
    return search(index, full->codes.data(), full->code_size, k, ef,
                  [=](std::int64_t i) { return fast_inner_product(query, base + static_cast<std::size_t>(i) * d, d); });
  }
  // Not an answer of "no hits": the caller counts this as a search error (fail open, visible).
  throw std::logic_error("hnsw_search_ip: the index's storage is neither FastFlatIP nor FastFp16IP");
}

}  // namespace tidegate::cache
