#pragma once
// Internal: launchers for the flat-index kernels (search.cu). Matrices are fp16 bit patterns,
// row stride `ld` elements (a multiple of 16, zero padded past dim).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace tidegate::kernels::detail {

struct SearchPlan {
  int qb = 0;        // queries per block pass (16, 32 or 64); 0 when the tiles do not fit
  int stages = 0;    // row-tile buffers in shared memory (2 = double-buffered)
  std::size_t smem = 0;
  int max_blocks = 0;  // resident blocks on the whole device
  bool queries_fastest = false;  // grid x = query tiles, so one row range's tiles run together
};

// kBuffered: one wide, double-buffered block per SM. kOccupancy: 16-query single-buffered blocks,
// several per SM. kFromEnvironment reads TIDEGATE_GPU_SEARCH_PLAN=buffered|occupancy (the A/B
// knob of bench/kernels), else kDefaultSearchPlan.
enum class SearchPlanKind { kFromEnvironment, kBuffered, kOccupancy };
inline constexpr SearchPlanKind kDefaultSearchPlan = SearchPlanKind::kOccupancy;

SearchPlan plan_search(std::size_t ld, std::size_t nq, int device,
                       SearchPlanKind kind = SearchPlanKind::kFromEnvironment);

// Blocks the scoring kernel will launch along the rows for `rows` scanned rows and nq queries.
int search_blocks(const SearchPlan& plan, std::size_t rows, std::size_t nq);

// Scores every valid row in [0, rows) against nq queries (fp16, [ceil(nq/qb)*qb][ld], zero
// padded) and leaves the best k (k <= 32) slots per query in out_slot/out_score ([nq][k], slot
// -1 when fewer exist). partial_* need nq * search_blocks(plan, rows, nq) * k entries.
void launch_search(const SearchPlan& plan, const std::uint16_t* matrix, const std::uint8_t* valid,
                   std::size_t rows, std::size_t ld, const std::uint16_t* queries, std::size_t nq,
                   std::size_t k, float* partial_score, std::int32_t* partial_slot, float* out_score,
                   std::int32_t* out_slot, cudaStream_t stream);

// matrix[slots[i]] = staged[i] for n rows of ld elements, and marks those slots valid.
void launch_scatter_rows(const std::uint16_t* staged, const std::int32_t* slots, std::size_t n,
                         std::size_t ld, std::uint16_t* matrix, std::uint8_t* valid, cudaStream_t stream);

}  // namespace tidegate::kernels::detail
