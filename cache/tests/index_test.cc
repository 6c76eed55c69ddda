#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "tidegate/cache/faiss_index.h"
#include "../src/fast_flat_ip.h"

using namespace tidegate::cache;
namespace encoder = tidegate::encoder;

namespace {

std::vector<float> random_unit(std::size_t n, std::size_t dim, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n * dim);
  for (std::size_t i = 0; i < n; ++i) {
    double norm = 0;
    for (std::size_t j = 0; j < dim; ++j) {
      v[i * dim + j] = d(rng);
      norm += double(v[i * dim + j]) * v[i * dim + j];
    }
    for (std::size_t j = 0; j < dim; ++j) v[i * dim + j] = static_cast<float>(v[i * dim + j] / std::sqrt(norm));
  }
  return v;
}

std::vector<std::int64_t> iota_ids(std::size_t n, std::int64_t base = 0) {
  std::vector<std::int64_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = base + static_cast<std::int64_t>(i);
  return ids;
}

class IndexTest : public ::testing::TestWithParam<IndexConfig::Type> {};

}  // namespace

TEST_P(IndexTest, FindsItselfAndRemoves) {
  constexpr std::size_t kDim = 32, kN = 500;
  IndexConfig cfg;
  FaissVectorIndex ix(kDim, cfg, GetParam());
  const auto v = random_unit(kN, kDim, 1);
  const auto ids = iota_ids(kN, 1000);
  ix.add(kN, v.data(), ids.data());
  EXPECT_EQ(ix.size(), kN);
  const auto hits = ix.search(1, v.data() + 7 * kDim, 3);
  EXPECT_EQ(hits[0].id, 1007);
  EXPECT_NEAR(hits[0].score, 1.0f, 1e-3);  // HNSW keeps fp16 vectors by default
  EXPECT_GE(hits[0].score, hits[1].score);
  EXPECT_TRUE(ix.remove(1007));
  EXPECT_FALSE(ix.remove(1007));
  EXPECT_FALSE(ix.remove(42));
  EXPECT_EQ(ix.size(), kN - 1);
  for (const auto& h : ix.search(1, v.data() + 7 * kDim, 5)) EXPECT_NE(h.id, 1007);
  EXPECT_THROW(ix.add(1, v.data(), ids.data() + 1), std::invalid_argument);  // duplicate id
}

TEST_P(IndexTest, FewerThanKResultsArePadded) {
  IndexConfig cfg;
  FaissVectorIndex ix(8, cfg, GetParam());
  const auto v = random_unit(2, 8, 2);
  const auto ids = iota_ids(2);
  EXPECT_EQ(ix.search(1, v.data(), 4)[0].id, -1);  // empty index
  ix.add(2, v.data(), ids.data());
  const auto hits = ix.search(1, v.data(), 4);
  EXPECT_GE(hits[1].id, 0);
  EXPECT_EQ(hits[2].id, -1);
  EXPECT_EQ(hits[3].id, -1);
}

TEST_P(IndexTest, CompactionDropsTombstonesAndKeepsEverythingElse) {
  constexpr std::size_t kDim = 16, kN = 400;
  IndexConfig cfg;
  cfg.rebuild_fraction = 0.1;
  FaissVectorIndex ix(kDim, cfg, GetParam());
  const auto v = random_unit(kN, kDim, 3);
  const auto ids = iota_ids(kN);
  ix.add(kN, v.data(), ids.data());
  for (std::int64_t id = 0; id < 100; ++id) ix.remove(id);
  EXPECT_TRUE(ix.needs_compaction());
  ix.compact();
  EXPECT_EQ(ix.tombstones(), 0u);
  EXPECT_EQ(ix.size(), kN - 100);
  EXPECT_EQ(ix.search(1, v.data() + 250 * kDim, 1)[0].id, 250);
  for (const auto& h : ix.search(1, v.data() + 5 * kDim, 10)) EXPECT_GE(h.id, 100);
}

INSTANTIATE_TEST_SUITE_P(Types, IndexTest, ::testing::Values(IndexConfig::Type::kFlat, IndexConfig::Type::kHnsw));

TEST(Index, HnswRecallAgainstFlat) {
  constexpr std::size_t kDim = 32, kN = 3000, kQ = 200;
  IndexConfig cfg;
  FaissVectorIndex flat(kDim, cfg, IndexConfig::Type::kFlat), hnsw(kDim, cfg, IndexConfig::Type::kHnsw);
  const auto v = random_unit(kN, kDim, 4);
  const auto q = random_unit(kQ, kDim, 5);
  const auto ids = iota_ids(kN);
  flat.add(kN, v.data(), ids.data());
  hnsw.add(kN, v.data(), ids.data());
  const auto a = flat.search(kQ, q.data(), 1), b = hnsw.search(kQ, q.data(), 1);
  std::size_t same = 0;
  for (std::size_t i = 0; i < kQ; ++i) same += a[i].id == b[i].id;
  EXPECT_GE(same, kQ * 9 / 10);
}

class HnswStorage : public ::testing::TestWithParam<IndexConfig::Storage> {};

TEST_P(HnswStorage, PrefetchingSearchAgreesWithFaissSearch) {
  // Same graph, two search loops: ours (hnsw_search.cc) and IndexHNSW::search. The beam
  // differs in detail (FAISS bounds its candidate heap), so a few near-ties may rank differently,
  // but the scores must agree and the top ids almost always.
  constexpr std::size_t kDim = 384, kN = 8000, kQ = 300, kK = 10;
  IndexConfig cfg;
  cfg.storage = GetParam();
  const double score_error = cfg.storage == IndexConfig::Storage::kFp16 ? 1e-3 : 1e-5;
  FaissVectorIndex ix(kDim, cfg, IndexConfig::Type::kHnsw), flat(kDim, cfg, IndexConfig::Type::kFlat);
  const auto v = random_unit(kN, kDim, 21);
  const auto ids = iota_ids(kN, 1000);
  ix.add(kN, v.data(), ids.data());
  flat.add(kN, v.data(), ids.data());
  // Queries near stored vectors, as paraphrases are.
  auto q = random_unit(kQ, kDim, 22);
  for (std::size_t i = 0; i < kQ; ++i)
    for (std::size_t j = 0; j < kDim; ++j) q[i * kDim + j] = 0.3f * q[i * kDim + j] + v[((i * 61) % kN) * kDim + j];
  // One query per call, as the cache searches: the prefetching loop runs for small calls only.
  auto one_by_one = [&] {
    std::vector<encoder::SearchHit> hits;
    for (std::size_t i = 0; i < kQ; ++i) {
      const auto h = ix.search(1, q.data() + i * kDim, kK);
      hits.insert(hits.end(), h.begin(), h.end());
    }
    return hits;
  };
  const auto ours = one_by_one();
  ix.use_faiss_search(true);
  const auto theirs = one_by_one();
  ix.use_faiss_search(false);
  // A batch goes to FAISS's (parallel) loop whatever the flag says.
  const auto batch = ix.search(kQ, q.data(), kK);
  for (std::size_t i = 0; i < batch.size(); ++i) ASSERT_EQ(batch[i].id, theirs[i].id) << i;
  const auto exact = flat.search(kQ, q.data(), kK);
  std::size_t same_top = 0, ours_exact = 0, theirs_exact = 0;
  for (std::size_t i = 0; i < kQ; ++i) {
    same_top += ours[i * kK].id == theirs[i * kK].id;
    ours_exact += ours[i * kK].id == exact[i * kK].id;
    theirs_exact += theirs[i * kK].id == exact[i * kK].id;
    for (std::size_t j = 0; j < kK; ++j) {
      ASSERT_GE(ours[i * kK + j].id, 1000) << i << "," << j;
      if (j > 0) {
        EXPECT_GE(ours[i * kK + j - 1].score, ours[i * kK + j].score) << "not best first";
      }
    }
    if (ours[i * kK].id == exact[i * kK].id) {
      EXPECT_NEAR(ours[i * kK].score, exact[i * kK].score, score_error);
    }
  }
  EXPECT_GE(same_top, kQ * 97 / 100);
  EXPECT_GE(ours_exact + kQ / 100, theirs_exact) << "the prefetching search lost recall";
  EXPECT_GE(ours_exact, kQ * 95 / 100);
  std::cout << "top-1 equal to exact: prefetching " << ours_exact << ", faiss " << theirs_exact << " of " << kQ
            << "; same top-1 " << same_top << "\n";
}

INSTANTIATE_TEST_SUITE_P(Index, HnswStorage,
                         ::testing::Values(IndexConfig::Storage::kFp16, IndexConfig::Storage::kFp32));

TEST(Index, FlatScanMatchesFaissFlatSearch) {
  constexpr std::size_t kDim = 384, kN = 3000, kK = 7;
  const auto v = random_unit(kN, kDim, 31), q = random_unit(30, kDim, 32);
  FastFlatIP ours(kDim);
  faiss::IndexFlatIP theirs(kDim);
  ours.add(kN, v.data());
  theirs.add(kN, v.data());
  for (const faiss::Index::idx_t nq : {1, 3, 25}) {  // 25 takes FAISS's own sgemm path in both
    std::vector<float> d1(nq * kK), d2(nq * kK);
    std::vector<faiss::Index::idx_t> l1(nq * kK), l2(nq * kK);
    ours.search(nq, q.data(), kK, d1.data(), l1.data());
    theirs.search(nq, q.data(), kK, d2.data(), l2.data());
    for (std::size_t i = 0; i < l1.size(); ++i) {
      EXPECT_EQ(l1[i], l2[i]) << "nq=" << nq << " i=" << i;
      EXPECT_NEAR(d1[i], d2[i], 1e-5);
    }
  }
  // Fewer entries than k: the rest is padded with -1.
  FastFlatIP small(kDim);
  small.add(2, v.data());
  std::vector<float> d(kK);
  std::vector<faiss::Index::idx_t> l(kK);
  small.search(1, v.data(), kK, d.data(), l.data());
  EXPECT_EQ(l[0], 0);
  EXPECT_EQ(l[1], 1);
  for (std::size_t j = 2; j < kK; ++j) EXPECT_EQ(l[j], -1);
}

TEST(Index, InnerProductKernelsMatchPlainLoop) {
  for (const std::size_t d : {1u, 7u, 15u, 16u, 17u, 31u, 33u, 63u, 64u, 65u, 384u, 385u}) {
    const auto a = random_unit(1, d, 7), b = random_unit(1, d, 8);
    double plain = 0;
    for (std::size_t i = 0; i < d; ++i) plain += double(a[i]) * b[i];
    EXPECT_NEAR(fast_inner_product(a.data(), b.data(), d), plain, 1e-5) << "d=" << d;
    // fp16 codes made and read back by FAISS's own codec: the kernels must agree with them.
    FastFp16IP codec(static_cast<faiss::Index::idx_t>(d));
    std::vector<std::uint16_t> ha(d), hb(d);
    std::vector<float> ra(d), rb(d);
    codec.sa_encode(1, a.data(), reinterpret_cast<std::uint8_t*>(ha.data()));
    codec.sa_encode(1, b.data(), reinterpret_cast<std::uint8_t*>(hb.data()));
    codec.sa_decode(1, reinterpret_cast<const std::uint8_t*>(ha.data()), ra.data());
    codec.sa_decode(1, reinterpret_cast<const std::uint8_t*>(hb.data()), rb.data());
    double mixed = 0, both = 0;
    for (std::size_t i = 0; i < d; ++i) {
      mixed += double(a[i]) * rb[i];
      both += double(ra[i]) * rb[i];
    }
    EXPECT_NEAR(fast_inner_product_f16(a.data(), hb.data(), d), mixed, 1e-5) << "d=" << d;
    EXPECT_NEAR(fast_inner_product_f16f16(ha.data(), hb.data(), d), both, 1e-5) << "d=" << d;
    EXPECT_NEAR(mixed, plain, 2e-3) << "fp16 rounding should be small, d=" << d;
  }
}

TEST(Index, PromotionFromFlatToHnswKeepsIds) {
  constexpr std::size_t kDim = 16, kN = 300;
  IndexConfig cfg;
  FaissVectorIndex ix(kDim, cfg, IndexConfig::Type::kFlat);
  const auto v = random_unit(kN, kDim, 6);
  const auto ids = iota_ids(kN, 50);
  ix.add(kN, v.data(), ids.data());
  ix.remove(60);
  ix.compact(IndexConfig::Type::kHnsw);
  EXPECT_EQ(ix.type(), IndexConfig::Type::kHnsw);
  EXPECT_EQ(ix.size(), kN - 1);
  EXPECT_EQ(ix.search(1, v.data() + 20 * kDim, 1)[0].id, 70);
}

// Searches, adds, removes and a compaction all at once: no crash, no removed id returned, and
// every id added and not removed is findable afterwards.
TEST(Index, ConcurrentSearchAddRemoveCompact) {
  constexpr std::size_t kDim = 16, kN = 2000;
  IndexConfig cfg;
  FaissVectorIndex ix(kDim, cfg, IndexConfig::Type::kHnsw);
  const auto v = random_unit(kN, kDim, 7);
  const auto ids = iota_ids(kN);
  ix.add(kN / 2, v.data(), ids.data());
  std::atomic<bool> done{false};
  std::atomic<int> searches{0};
  std::thread searcher([&] {
    std::size_t i = 0;
    while (!done) {
      const auto hits = ix.search(1, v.data() + (i++ % kN) * kDim, 4);
      for (const auto& h : hits) ASSERT_LT(h.id, static_cast<std::int64_t>(kN));
      ++searches;
    }
  });
  std::thread compactor([&] {
    for (int r = 0; r < 3; ++r) ix.compact();
  });
  for (std::size_t i = kN / 2; i < kN; ++i) ix.add(1, v.data() + i * kDim, ids.data() + i);
  for (std::int64_t id = 0; id < 200; ++id) ix.remove(id);
  compactor.join();
  ix.compact();
  done = true;
  searcher.join();
  EXPECT_GT(searches.load(), 0);
  EXPECT_EQ(ix.size(), kN - 200);
  std::size_t found = 0;
  for (std::size_t i = 200; i < kN; i += 37) found += ix.search(1, v.data() + i * kDim, 1)[0].id == static_cast<std::int64_t>(i);
  EXPECT_GE(found, (kN - 200) / 37 * 9 / 10);
  for (std::int64_t id = 0; id < 200; id += 13)
    for (const auto& h : ix.search(1, v.data() + id * kDim, 4)) EXPECT_GE(h.id, 200);
}
