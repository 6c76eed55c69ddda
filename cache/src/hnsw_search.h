#pragma once
// Single-query search of a FAISS HNSW graph whose storage is FastFlatIP (inner product).
// FAISS 1.7.3 computes one neighbour's distance at a time, and at a million entries each of
// those is a cache miss on a 1.5 KB vector: the search waits on memory, one vector after
// another. This is the same algorithm (greedy descent through the upper levels, then a beam of
// width ef on level 0, as in the HNSW paper) on FAISS's own graph, but it marks a node's
// unvisited neighbours first and prefetches their vectors ahead of scoring them, so the misses
// overlap. Results match FAISS's search up to ties (tested in cache/tests/index_test.cc).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace faiss {
struct IndexHNSW;
}

namespace tidegate::cache {

struct ScoredPosition {
  float score;
  std::int64_t position;  // FAISS position in the index
};

// Best `k` positions by inner product, best first; fewer when the index holds fewer.
// ef < k is raised to k. The storage must be FastFlatIP or FastFp16IP (std::logic_error
// otherwise). Thread-safe for concurrent searches (scratch is per thread); the caller excludes
// concurrent adds.
std::vector<ScoredPosition> hnsw_search_ip(const faiss::IndexHNSW& index, const float* query, std::size_t k,
                                           std::size_t ef);

}  // namespace tidegate::cache
