// gpu-flat against the exact CPU reference on the same fp16-rounded data. Tolerance: scores of
// unit-scale vectors agree within 1e-4 (only the fp32 summation order differs); a differing id
// at a rank is accepted only when its true score ties the reference's within that tolerance.
#include <cmath>
#include <unordered_set>

#include "gpu_test_util.h"
#include "tidegate/kernels/reference.h"

namespace tidegate::kernels {
namespace {

using testing::random_vector;
constexpr float kScoreTol = 1e-4f;

std::vector<float> normalised(std::size_t n, std::size_t dim, unsigned seed) {
  std::vector<float> v = random_vector(n * dim, seed);
  for (std::size_t r = 0; r < n; ++r) {
    double s = 0;
    for (std::size_t d = 0; d < dim; ++d) s += v[r * dim + d] * v[r * dim + d];
    const float inv = static_cast<float>(1.0 / std::sqrt(s));
    for (std::size_t d = 0; d < dim; ++d) v[r * dim + d] = round_to_half(v[r * dim + d] * inv);
  }
  return v;
}

float dot(const float* a, const float* b, std::size_t dim) {
  float s = 0;
  for (std::size_t d = 0; d < dim; ++d) s += a[d] * b[d];
  return s;
}

// Compares GPU hits against the reference over the live rows (rows/ids as the reference sees them).
void expect_matches(const std::vector<encoder::SearchHit>& got, const std::vector<float>& rows,
                    const std::vector<std::int64_t>& ids, std::size_t dim, const std::vector<float>& queries,
                    std::size_t nq, std::size_t k) {
  const auto want = ref::flat_topk(rows.data(), ids.data(), ids.size(), dim, queries.data(), nq, k);
  ASSERT_EQ(got.size(), want.size());
  std::unordered_map<std::int64_t, std::size_t> row_of;
  for (std::size_t i = 0; i < ids.size(); ++i) row_of[ids[i]] = i;
  for (std::size_t q = 0; q < nq; ++q) {
    for (std::size_t r = 0; r < k; ++r) {
      const auto& g = got[q * k + r];
      const auto& w = want[q * k + r];
      if (w.id < 0) {
        EXPECT_EQ(g.id, -1) << "q " << q << " rank " << r;
        continue;
      }
      ASSERT_NEAR(g.score, w.score, kScoreTol) << "q " << q << " rank " << r;
      if (g.id != w.id) {
        ASSERT_TRUE(row_of.contains(g.id)) << "unknown id " << g.id;
        const float true_score = dot(&rows[row_of[g.id] * dim], &queries[q * dim], dim);
        EXPECT_NEAR(true_score, w.score, kScoreTol) << "q " << q << " rank " << r << " not a tie";
      }
    }
  }
}

TEST(GpuFlatIndex, MatchesReferenceAcrossBatchSizesAndK) {
  TG_SKIP_WITHOUT_GPU();
  const std::size_t dim = 384, n = 5000;  // n not a multiple of the 64-row tile
  std::string why;
  auto index = make_gpu_flat_index(dim, &why);
  ASSERT_NE(index, nullptr) << why;
  const auto rows = normalised(n, dim, 1);
  std::vector<std::int64_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::int64_t>(1000 + 7 * i);
  index->add(n, rows.data(), ids.data());
  EXPECT_EQ(index->size(), n);
  for (std::size_t nq : {1, 5, 16, 33, 64, 100}) {
    const auto queries = normalised(nq, dim, static_cast<unsigned>(100 + nq));
    for (std::size_t k : {1, 10, 32}) {
      SCOPED_TRACE("nq " + std::to_string(nq) + " k " + std::to_string(k));
      expect_matches(index->search(nq, queries.data(), k), rows, ids, dim, queries, nq, k);
    }
  }
}

TEST(GpuFlatIndex, RemoveMasksAndAddReusesSlots) {
  TG_SKIP_WITHOUT_GPU();
  const std::size_t dim = 64, n = 1000;
  auto index = make_gpu_flat_index(dim, nullptr);
  ASSERT_NE(index, nullptr);
  EXPECT_TRUE(enable_gpu_flat_kernel_timing(*index));
  EXPECT_FALSE(gpu_flat_last_kernel_ms(*index).has_value());  // no search yet
  auto rows = normalised(n, dim, 2);
  std::vector<std::int64_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::int64_t>(i);
  index->add(n, rows.data(), ids.data());
  EXPECT_THROW(index->add(1, rows.data(), ids.data()), std::invalid_argument);  // duplicate id
  std::vector<float> live_rows;
  std::vector<std::int64_t> live_ids;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 3 == 0) {
      EXPECT_TRUE(index->remove(ids[i]));
    } else {
      live_rows.insert(live_rows.end(), rows.begin() + i * dim, rows.begin() + (i + 1) * dim);
      live_ids.push_back(ids[i]);
    }
  }
  EXPECT_FALSE(index->remove(0));
  EXPECT_FALSE(index->remove(123456));
  EXPECT_EQ(index->size(), live_ids.size());
  // Query with the removed rows themselves: they would score 1.0 if they were still visible.
  std::vector<float> queries(rows.begin(), rows.begin() + 10 * dim);
  auto hits = index->search(10, queries.data(), 5);
  for (const auto& h : hits) EXPECT_NE(h.id % 3, 0) << "removed id " << h.id << " returned";
  ASSERT_TRUE(gpu_flat_last_kernel_ms(*index).has_value());
  EXPECT_GT(*gpu_flat_last_kernel_ms(*index), 0.0);
  expect_matches(hits, live_rows, live_ids, dim, queries, 10, 5);

  // New ids land in freed slots; the freshly added vectors are found as their own best match.
  const std::size_t m = 200;
  auto fresh = normalised(m, dim, 3);
  std::vector<std::int64_t> fresh_ids(m);
  for (std::size_t i = 0; i < m; ++i) fresh_ids[i] = static_cast<std::int64_t>(50000 + i);
  index->add(m, fresh.data(), fresh_ids.data());
  live_rows.insert(live_rows.end(), fresh.begin(), fresh.end());
  live_ids.insert(live_ids.end(), fresh_ids.begin(), fresh_ids.end());
  EXPECT_EQ(index->size(), live_ids.size());
  auto again = index->search(m, fresh.data(), 3);
  for (std::size_t q = 0; q < m; ++q) EXPECT_EQ(again[q * 3].id, fresh_ids[q]);
  expect_matches(again, live_rows, live_ids, dim, fresh, m, 3);
}

TEST(GpuFlatIndex, GrowsPadsOddDimsAndHandlesFewerThanK) {
  TG_SKIP_WITHOUT_GPU();
  const std::size_t dim = 40;  // multiple of 8, not of 16: rows are zero padded on the device
  auto index = make_gpu_flat_index(dim, nullptr);
  ASSERT_NE(index, nullptr);
  const auto q = normalised(3, dim, 9);
  auto empty = index->search(3, q.data(), 4);
  for (const auto& h : empty) EXPECT_EQ(h.id, -1);

  std::vector<float> rows;
  std::vector<std::int64_t> ids;
  for (int round = 0; round < 4; ++round) {  // 4 x 3000 rows: doubles past the initial 4096
    auto part = normalised(3000, dim, 20 + round);
    std::vector<std::int64_t> part_ids(3000);
    for (std::size_t i = 0; i < 3000; ++i) part_ids[i] = (std::int64_t{1} << 40) + round * 3000 + static_cast<std::int64_t>(i);  // wide ids
    index->add(3000, part.data(), part_ids.data());
    rows.insert(rows.end(), part.begin(), part.end());
    ids.insert(ids.end(), part_ids.begin(), part_ids.end());
    expect_matches(index->search(3, q.data(), 8), rows, ids, dim, q, 3, 8);
  }
  EXPECT_THROW(index->search(1, q.data(), kGpuMaxK + 1), std::invalid_argument);

  auto small = make_gpu_flat_index(dim, nullptr);
  small->add(2, rows.data(), ids.data());
  auto few = small->search(1, q.data(), 5);
  EXPECT_TRUE(few[0].id == ids[0] || few[0].id == ids[1]);
  EXPECT_TRUE(few[1].id == ids[0] || few[1].id == ids[1]);
  EXPECT_EQ(few[2].id, -1);
  EXPECT_EQ(few[4].id, -1);
}

}  // namespace
}  // namespace tidegate::kernels
