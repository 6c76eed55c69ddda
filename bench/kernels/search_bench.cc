// Search: gpu-flat against FAISS CPU flat (exact) and HNSW (approximate) on the same unit
// vectors. The GPU scan reads entries * dim * 2 bytes per pass; against the device's measured
// copy rate that gives the fraction of the bandwidth bound reached.
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <numeric>
#include <unordered_set>

#include "bench.h"
#include "tidegate/kernels/gpu.h"

namespace tidegate::kernels::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kChunkRows = 1 << 20;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Shared top-k ids between an answer and the exact one, over all queries.
double recall(const std::vector<std::int64_t>& got, const std::vector<std::int64_t>& exact, std::size_t nq,
              std::size_t k) {
  std::size_t hit = 0;
  for (std::size_t q = 0; q < nq; ++q) {
    std::unordered_set<std::int64_t> want(exact.begin() + static_cast<std::ptrdiff_t>(q * k),
                                          exact.begin() + static_cast<std::ptrdiff_t>((q + 1) * k));
    for (std::size_t r = 0; r < k; ++r) hit += want.count(got[q * k + r]);
  }
  return static_cast<double>(hit) / static_cast<double>(nq * k);
}

boost::json::object faiss_batch(faiss::Index& index, std::size_t b, const std::vector<float>& queries, std::size_t k,
                                double min_time) {
  std::vector<float> dist(b * k);
  std::vector<faiss::Index::idx_t> labels(b * k);
  const Timing t = time_calls([&] { index.search(static_cast<faiss::Index::idx_t>(b), queries.data(),
                                                 static_cast<faiss::Index::idx_t>(k), dist.data(), labels.data()); },
                              min_time, 2, 1000);
  boost::json::object r = to_json(t);
  r["batch"] = b;
  r["queries_per_s"] = static_cast<double>(b) / (t.mean_ms / 1e3);
  return r;
}

std::vector<std::int64_t> faiss_ids(faiss::Index& index, std::size_t nq, const std::vector<float>& queries,
                                    std::size_t k) {
  std::vector<float> dist(nq * k);
  std::vector<faiss::Index::idx_t> labels(nq * k);
  index.search(static_cast<faiss::Index::idx_t>(nq), queries.data(), static_cast<faiss::Index::idx_t>(k), dist.data(),
               labels.data());
  return {labels.begin(), labels.end()};
}

}  // namespace

boost::json::object run_search_bench(const Options& o, double copy_gbps) {
  const std::size_t dim = o.dim, k = o.k;
  const std::size_t nq_max = *std::max_element(o.batches.begin(), o.batches.end());
  std::vector<float> queries(nq_max * dim);
  random_unit_vectors(queries.data(), nq_max, dim, 999);
  boost::json::array sizes;
  for (const std::size_t n : o.sizes) {
    std::cerr << "kernels_bench: search, " << n << " entries\n";
    boost::json::object r{{"entries", n}, {"dim", dim}, {"k", k}, {"data", "uniform random unit vectors"}};
    std::string why = o.gpu_skip_reason;
    std::unique_ptr<encoder::VectorIndex> gpu;
    if (o.gpu) gpu = make_gpu_flat_index(dim, &why);
    if (gpu) enable_gpu_flat_kernel_timing(*gpu);
    std::unique_ptr<faiss::IndexFlatIP> flat;
    if (n <= o.faiss_flat_max) flat = std::make_unique<faiss::IndexFlatIP>(static_cast<faiss::Index::idx_t>(dim));
    std::unique_ptr<faiss::IndexHNSWFlat> hnsw;
    if (n <= o.hnsw_max) {
      hnsw = std::make_unique<faiss::IndexHNSWFlat>(static_cast<int>(dim), 32, faiss::METRIC_INNER_PRODUCT);
      hnsw->hnsw.efConstruction = 40;
      hnsw->hnsw.efSearch = 64;
    }
    double gpu_add = 0, flat_add = 0, hnsw_add = 0;
    std::vector<float> rows(std::min(n, kChunkRows) * dim);
    std::vector<std::int64_t> ids(std::min(n, kChunkRows));
    for (std::size_t begin = 0; begin < n; begin += kChunkRows) {
      const std::size_t c = std::min(kChunkRows, n - begin);
      random_unit_vectors(rows.data(), c, dim, begin / kChunkRows + 1);
      std::iota(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(c), static_cast<std::int64_t>(begin));
      auto t0 = Clock::now();
      if (gpu) gpu->add(c, rows.data(), ids.data());
      gpu_add += seconds_since(t0);
      t0 = Clock::now();
      if (flat) flat->add(static_cast<faiss::Index::idx_t>(c), rows.data());
      flat_add += seconds_since(t0);
      t0 = Clock::now();
      if (hnsw) hnsw->add(static_cast<faiss::Index::idx_t>(c), rows.data());
      hnsw_add += seconds_since(t0);
    }
    std::vector<std::int64_t> exact;
    if (flat) exact = faiss_ids(*flat, nq_max, queries, k);

    if (gpu) {
      boost::json::array batches;
      const double bytes = static_cast<double>(n) * static_cast<double>(dim) * 2.0;
      for (const std::size_t b : o.batches) {
        double kernel_ms = 0;
        std::size_t kernel_n = 0;
        const Timing t = time_calls(
            [&] {
              gpu->search(b, queries.data(), k);
              if (auto ms = gpu_flat_last_kernel_ms(*gpu)) {
                kernel_ms += *ms;
                ++kernel_n;
              }
            },
            o.min_time_s, 3, 100000);
        boost::json::object e = to_json(t);
        if (kernel_n) {  // device time of the scan + merge kernels alone (CUDA events)
          const double mean = kernel_ms / static_cast<double>(kernel_n);
          e["kernel_mean_ms"] = mean;
          e["kernel_scan_gbps"] = bytes / (mean / 1e3) / 1e9;
          if (copy_gbps > 0) e["kernel_fraction_of_copy_bandwidth"] = bytes / (mean / 1e3) / 1e9 / copy_gbps;
        }
        e["batch"] = b;
        e["queries_per_s"] = static_cast<double>(b) / (t.mean_ms / 1e3);
        // Host-to-device query copy, both kernels and the result copy are all inside mean_ms.
        e["bytes_scanned_per_call"] = bytes;
        e["scan_gbps"] = bytes / (t.mean_ms / 1e3) / 1e9;
        if (copy_gbps > 0) e["fraction_of_copy_bandwidth"] = bytes / (t.mean_ms / 1e3) / 1e9 / copy_gbps;
        batches.push_back(std::move(e));
      }
      boost::json::object g{{"add_s", gpu_add}, {"batches", std::move(batches)}};
      if (flat) {
        const auto hits = gpu->search(nq_max, queries.data(), k);
        std::vector<std::int64_t> got(hits.size());
        for (std::size_t i = 0; i < hits.size(); ++i) got[i] = hits[i].id;
        g["recall_at_k_vs_faiss_flat"] = recall(got, exact, nq_max, k);
      }
      r["gpu_flat"] = std::move(g);
    } else {
      r["gpu_flat"] = {{"skipped", why}};
    }
    if (flat) {
      boost::json::array batches;
      for (const std::size_t b : o.batches) batches.push_back(faiss_batch(*flat, b, queries, k, o.min_time_s));
      r["faiss_flat"] = {{"add_s", flat_add}, {"batches", std::move(batches)}};
    } else {
      r["faiss_flat"] = {{"skipped", "entries above --faiss-flat-max"}};
    }
    if (hnsw) {
      boost::json::array batches;
      for (const std::size_t b : o.batches) batches.push_back(faiss_batch(*hnsw, b, queries, k, o.min_time_s));
      boost::json::object h{{"M", 32}, {"efConstruction", 40}, {"efSearch", 64}, {"build_s", hnsw_add},
                            {"batches", std::move(batches)}};
      if (flat) h["recall_at_k_vs_faiss_flat"] = recall(faiss_ids(*hnsw, nq_max, queries, k), exact, nq_max, k);
      r["faiss_hnsw"] = std::move(h);
    } else {
      r["faiss_hnsw"] = {{"skipped", "entries above --hnsw-max (construction time bounded)"}};
    }
    sizes.push_back(std::move(r));
  }
  return {{"sizes", std::move(sizes)}};
}

}  // namespace tidegate::kernels::bench
