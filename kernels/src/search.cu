// Flat inner-product top-k. One pass streams the fp16 matrix once per query tile: each warp
// pulls 16 contiguous rows into shared memory with 16-byte cp.async copies (the next tile is in
// flight while this one is scored), tensor cores score them against up to 64 queries held in
// shared memory, and one warp per query folds the 64 new scores into a warp-wide sorted top-k.
// A second kernel merges the per-block lists. The scan is bandwidth-bound as long as the scoring
// and selection of one tile finish before the next tile lands.
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cuda_util.h"
#include "search.h"

namespace tidegate::kernels::detail {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kWarpRows = 16;
constexpr int kTileRows = kWarps * kWarpRows;
constexpr int kListWidth = 32;
constexpr unsigned kFull = 0xffffffffu;
// Shared-memory row stride = ld + 8 halves: rows then start 16 bytes apart in bank space, so the
// tensor-core fragment loads are conflict-free.
constexpr int kSmemPad = 8;

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  // The clobber keeps the compiler from hoisting shared-memory reads above the wait.
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The warp holds a list sorted best-first, one entry per lane (lanes >= k stay at -inf). Offers
// one candidate per lane; strictly better candidates are inserted, earlier ones win ties.
__device__ __forceinline__ void warp_offer(float cand, int cand_slot, float& ls, int& li, int k) {
  const int lane = threadIdx.x & 31;
  float thr = __shfl_sync(kFull, ls, k - 1);
  unsigned pending = __ballot_sync(kFull, cand > thr);
  while (pending) {
    const int src = __ffs(pending) - 1;
    pending &= pending - 1;
    const float cs = __shfl_sync(kFull, cand, src);
    const int ci = __shfl_sync(kFull, cand_slot, src);
    if (cs > thr) {  // uniform across the warp
      const int pos = __popc(__ballot_sync(kFull, lane < k && ls >= cs));
      const float up_s = __shfl_up_sync(kFull, ls, 1);
      const int up_i = __shfl_up_sync(kFull, li, 1);
      if (lane == pos) {
        ls = cs;
        li = ci;
      } else if (lane > pos && lane < k) {
        ls = up_s;
        li = up_i;
      }
      thr = __shfl_sync(kFull, ls, k - 1);
    }
  }
}

template <int QB>
__global__ void __launch_bounds__(kThreads) score_topk_kernel(
    const __half* __restrict__ matrix, const std::uint8_t* __restrict__ valid, int rows, int ld,
    const __half* __restrict__ queries, int nq, int k, int tiles_per_block, int stages, int queries_fastest,
    float* __restrict__ part_score, int* __restrict__ part_slot) {
  using namespace nvcuda;
  extern __shared__ __align__(128) unsigned char smem[];
  const int lds = ld + kSmemPad;
  __half* q_s = reinterpret_cast<__half*>(smem);
  __half* x_s = q_s + QB * lds;
  float* score_s = reinterpret_cast<float*>(x_s + stages * kTileRows * lds);  // [QB][kTileRows]
  float* list_s = score_s + QB * kTileRows;                                   // [QB][32]
  int* list_i = reinterpret_cast<int*>(list_s + QB * kListWidth);
  float* thr_s = reinterpret_cast<float*>(list_i + QB * kListWidth);  // [QB] k-th best so far

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  // queries_fastest: the query tiles of one row range are neighbours in launch order, run at the
  // same time and share the rows through L2 instead of each reading them from memory.
  const int row_block = queries_fastest ? blockIdx.y : blockIdx.x;
  const int row_blocks = queries_fastest ? gridDim.y : gridDim.x;
  const int q0 = (queries_fastest ? blockIdx.x : blockIdx.y) * QB;
  const int q_here = min(QB, nq - q0);

  // Query tile (zero padded by the host past nq) into shared memory, 16 bytes at a time.
  const int chunks_per_row = ld / 8;
  for (int c = threadIdx.x; c < QB * chunks_per_row; c += kThreads) {
    const int r = c / chunks_per_row, col = (c % chunks_per_row) * 8;
    *reinterpret_cast<uint4*>(q_s + r * lds + col) =
        *reinterpret_cast<const uint4*>(queries + static_cast<std::size_t>(q0 + r) * ld + col);
  }
  for (int i = threadIdx.x; i < QB * kListWidth; i += kThreads) {
    list_s[i] = neg_inf();
    list_i[i] = -1;
  }
  for (int i = threadIdx.x; i < QB; i += kThreads) thr_s[i] = neg_inf();

  const int total_tiles = (rows + kTileRows - 1) / kTileRows;
  const int t0 = row_block * tiles_per_block;
  const int t1 = min(total_tiles, t0 + tiles_per_block);

  // Each warp copies its own 16 rows: one contiguous 16 * ld * 2 byte run of the matrix.
  auto issue = [&](int tile, int buf) {
    const __half* src = matrix + (static_cast<std::size_t>(tile) * kTileRows + warp * kWarpRows) * ld;
    __half* dst = x_s + (buf * kTileRows + warp * kWarpRows) * lds;
    for (int c = lane; c < kWarpRows * chunks_per_row; c += 32) {
      const int r = c / chunks_per_row, col = (c % chunks_per_row) * 8;
      cp_async16(dst + r * lds + col, src + static_cast<std::size_t>(r) * ld + col);
    }
    cp_async_commit();
  };
  if (t0 < t1) issue(t0, 0);
  __syncthreads();

  for (int t = t0; t < t1; ++t) {
    const int buf = stages == 2 ? (t - t0) & 1 : 0;
    if (stages == 2 && t + 1 < t1) {
      issue(t + 1, buf ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncwarp();

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[QB / 16];
#pragma unroll
    for (int nt = 0; nt < QB / 16; ++nt) wmma::fill_fragment(acc[nt], 0.0f);
    const __half* xw = x_s + (buf * kTileRows + warp * kWarpRows) * lds;
    for (int kk = 0; kk < ld; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
      wmma::load_matrix_sync(a, xw + kk, lds);
#pragma unroll
      for (int nt = 0; nt < QB / 16; ++nt) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
        wmma::load_matrix_sync(b, q_s + nt * 16 * lds + kk, lds);
        wmma::mma_sync(acc[nt], a, b, acc[nt]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < QB / 16; ++nt)
      wmma::store_matrix_sync(score_s + nt * 16 * kTileRows + warp * kWarpRows, acc[nt], kTileRows,
                              wmma::mem_col_major);
    if (stages == 1 && t + 1 < t1) {
      __syncwarp();
      issue(t + 1, 0);  // lands while the block selects
    }
    __syncthreads();

    const int base = t * kTileRows;
    const int slot_a = base + lane, slot_b = base + 32 + lane;
    const bool ok_a = slot_a < rows && valid[slot_a];
    const bool ok_b = slot_b < rows && valid[slot_b];
    for (int q = warp; q < q_here; q += kWarps) {
      // Most tiles change no list once the lists fill: one vote against the cached k-th score
      // settles them without touching the lists.
      const float* sq = score_s + q * kTileRows;
      const float ca = ok_a ? sq[lane] : neg_inf();
      const float cb = ok_b ? sq[32 + lane] : neg_inf();
      const float thr = thr_s[q];
      if (!__any_sync(kFull, ca > thr || cb > thr)) continue;
      float ls = list_s[q * kListWidth + lane];
      int li = list_i[q * kListWidth + lane];
      warp_offer(ca, slot_a, ls, li, k);
      warp_offer(cb, slot_b, ls, li, k);
      list_s[q * kListWidth + lane] = ls;
      list_i[q * kListWidth + lane] = li;
      const float kth = __shfl_sync(kFull, ls, k - 1);
      __syncwarp();  // every lane's read of thr_s[q] above happens before lane 0 overwrites it
      if (lane == 0) thr_s[q] = kth;
    }
    __syncthreads();
  }

  for (int q = warp; q < q_here; q += kWarps) {
    if (lane < k) {
      const std::size_t o = (static_cast<std::size_t>(q0 + q) * row_blocks + row_block) * k + lane;
      part_score[o] = list_s[q * kListWidth + lane];
      part_slot[o] = list_i[q * kListWidth + lane];
    }
  }
}

// One block per query folds the per-block lists (list order = slot order) into the final top-k:
// each warp folds a contiguous run of lists, then warp 0 folds the warps' lists in order, so an
// earlier slot still wins a tie.
constexpr int kMergeWarps = 8;
__global__ void __launch_bounds__(kMergeWarps * 32) merge_topk_kernel(
    const float* __restrict__ part_score, const int* __restrict__ part_slot, int lists, int k,
    float* __restrict__ out_score, int* __restrict__ out_slot) {
  __shared__ float warp_s[kMergeWarps][32];
  __shared__ int warp_i[kMergeWarps][32];
  const int q = blockIdx.x;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int n = lists * k;
  const int per_warp = (n + kMergeWarps - 1) / kMergeWarps;
  const int begin = warp * per_warp, end = min(n, begin + per_warp);
  const float* ps = part_score + static_cast<std::size_t>(q) * n;
  const int* pi = part_slot + static_cast<std::size_t>(q) * n;
  float ls = neg_inf(), thr = neg_inf();
  int li = -1;
  for (int base = begin; base < end; base += 32) {
    const int c = base + lane;
    const int slot = c < end ? pi[c] : -1;
    const float cand = slot >= 0 ? ps[c] : neg_inf();
    if (!__any_sync(kFull, cand > thr)) continue;
    warp_offer(cand, slot, ls, li, k);
    thr = __shfl_sync(kFull, ls, k - 1);
  }
  warp_s[warp][lane] = ls;
  warp_i[warp][lane] = li;
  __syncthreads();
  if (warp != 0) return;
  ls = neg_inf();
  li = -1;
  for (int w = 0; w < kMergeWarps; ++w) {
    const bool in = lane < k && warp_i[w][lane] >= 0;
    warp_offer(in ? warp_s[w][lane] : neg_inf(), in ? warp_i[w][lane] : -1, ls, li, k);
  }
  if (lane < k) {
    out_score[static_cast<std::size_t>(q) * k + lane] = ls;
    out_slot[static_cast<std::size_t>(q) * k + lane] = li;
  }
}

__global__ void scatter_rows_kernel(const uint4* __restrict__ staged, const int* __restrict__ slots, int n,
                                    int chunks_per_row, uint4* __restrict__ matrix, std::uint8_t* __restrict__ valid) {
  const std::size_t total = static_cast<std::size_t>(n) * chunks_per_row;
  for (std::size_t c = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; c < total;
       c += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t row = c / chunks_per_row, col = c % chunks_per_row;
    const int slot = slots[row];
    matrix[static_cast<std::size_t>(slot) * chunks_per_row + col] = staged[c];
    if (col == 0) valid[slot] = 1;
  }
}

std::size_t smem_bytes(int qb, int stages, std::size_t ld) {
  const std::size_t lds = ld + kSmemPad;
  return (static_cast<std::size_t>(qb) * lds + static_cast<std::size_t>(stages) * kTileRows * lds) * 2 +
         static_cast<std::size_t>(qb) * kTileRows * 4 + static_cast<std::size_t>(qb) * kListWidth * 8 +
         static_cast<std::size_t>(qb) * 4;
}

template <int QB>
void launch_qb(const SearchPlan& plan, const __half* matrix, const std::uint8_t* valid, int rows, int ld,
               const __half* queries, int nq, int k, float* ps, int* pi, cudaStream_t stream) {
  const int total_tiles = (rows + kTileRows - 1) / kTileRows;
  const int blocks = search_blocks(plan, static_cast<std::size_t>(rows), static_cast<std::size_t>(nq));
  const int tiles_per_block = (total_tiles + blocks - 1) / blocks;
  const unsigned query_tiles = static_cast<unsigned>((nq + QB - 1) / QB);
  TG_CUDA_CHECK(cudaFuncSetAttribute(score_topk_kernel<QB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(plan.smem)));
  const dim3 grid = plan.queries_fastest ? dim3(query_tiles, static_cast<unsigned>(blocks))
                                         : dim3(static_cast<unsigned>(blocks), query_tiles);
  score_topk_kernel<QB><<<grid, kThreads, plan.smem, stream>>>(matrix, valid, rows, ld, queries, nq, k,
                                                                tiles_per_block, plan.stages,
                                                                plan.queries_fastest ? 1 : 0, ps, pi);
  TG_CUDA_CHECK(cudaGetLastError());
}

const void* kernel_for(int qb) {
  return qb == 64   ? reinterpret_cast<const void*>(score_topk_kernel<64>)
         : qb == 32 ? reinterpret_cast<const void*>(score_topk_kernel<32>)
                    : reinterpret_cast<const void*>(score_topk_kernel<16>);
}

// Blocks of this plan resident on the whole device, 0 when its tiles do not fit.
int resident_blocks(int qb, int stages, std::size_t bytes, int max_smem, int sms) {
  if (bytes > static_cast<std::size_t>(max_smem)) return 0;
  int per_sm = 0;
  TG_CUDA_CHECK(cudaFuncSetAttribute(kernel_for(qb), cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  TG_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_for(qb), kThreads, bytes));
  return sms * (per_sm > 0 ? per_sm : 1);
}

SearchPlanKind plan_kind_from_env() {
  const char* v = std::getenv("TIDEGATE_GPU_SEARCH_PLAN");
  if (v != nullptr && std::string_view(v) == "buffered") return SearchPlanKind::kBuffered;
  if (v != nullptr && std::string_view(v) == "occupancy") return SearchPlanKind::kOccupancy;
  return kDefaultSearchPlan;
}

}  // namespace

SearchPlan plan_search(std::size_t ld, std::size_t nq, int device, SearchPlanKind kind) {
  int max_smem = 0, sms = 0;
  TG_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  TG_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (kind == SearchPlanKind::kFromEnvironment) kind = plan_kind_from_env();
  if (kind == SearchPlanKind::kOccupancy) {
    // 16-query tiles, one row buffer: several blocks per SM hide each other's latency, and wider
    // batches run as more 16-query tiles over the same rows (shared through L2).
    const std::size_t bytes = smem_bytes(16, 1, ld);
    if (const int blocks = resident_blocks(16, 1, bytes, max_smem, sms); blocks > 0)
      return SearchPlan{16, 1, bytes, blocks, true};
  }
  // Buffered: the smallest query tile that covers the batch (fewer wasted tensor-core columns at
  // batch 1), then the largest that fits; double buffering preferred over a wider query tile.
  const int want = nq <= 16 ? 16 : nq <= 32 ? 32 : 64;
  for (int stages : {2, 1}) {
    for (int qb = want; qb >= 16; qb /= 2) {
      const std::size_t bytes = smem_bytes(qb, stages, ld);
      if (const int blocks = resident_blocks(qb, stages, bytes, max_smem, sms); blocks > 0)
        return SearchPlan{qb, stages, bytes, blocks, false};
    }
  }
  return SearchPlan{};
}

int search_blocks(const SearchPlan& plan, std::size_t rows, std::size_t nq) {
  const std::size_t tiles = (rows + kTileRows - 1) / kTileRows;
  std::size_t budget = static_cast<std::size_t>(plan.max_blocks);
  if (plan.queries_fastest && plan.qb > 0) {  // every query tile's blocks resident at once
    const std::size_t query_tiles = (nq + plan.qb - 1) / plan.qb;
    budget = budget / query_tiles > 0 ? budget / query_tiles : 1;
  }
  const std::size_t blocks = tiles < budget ? tiles : budget;
  if (blocks == 0) return 1;
  const std::size_t per = (tiles + blocks - 1) / blocks;
  return static_cast<int>((tiles + per - 1) / per);
}

void launch_search(const SearchPlan& plan, const std::uint16_t* matrix, const std::uint8_t* valid,
                   std::size_t rows, std::size_t ld, const std::uint16_t* queries, std::size_t nq,
                   std::size_t k, float* partial_score, std::int32_t* partial_slot, float* out_score,
                   std::int32_t* out_slot, cudaStream_t stream) {
  const auto* m = reinterpret_cast<const __half*>(matrix);
  const auto* q = reinterpret_cast<const __half*>(queries);
  const int r = static_cast<int>(rows), l = static_cast<int>(ld), n = static_cast<int>(nq), kk = static_cast<int>(k);
  switch (plan.qb) {
    case 64: launch_qb<64>(plan, m, valid, r, l, q, n, kk, partial_score, partial_slot, stream); break;
    case 32: launch_qb<32>(plan, m, valid, r, l, q, n, kk, partial_score, partial_slot, stream); break;
    default: launch_qb<16>(plan, m, valid, r, l, q, n, kk, partial_score, partial_slot, stream); break;
  }
  merge_topk_kernel<<<n, kMergeWarps * 32, 0, stream>>>(partial_score, partial_slot, search_blocks(plan, rows, nq),
                                                         kk, out_score, out_slot);
  TG_CUDA_CHECK(cudaGetLastError());
}

void launch_scatter_rows(const std::uint16_t* staged, const std::int32_t* slots, std::size_t n, std::size_t ld,
                         std::uint16_t* matrix, std::uint8_t* valid, cudaStream_t stream) {
  if (n == 0) return;
  const int chunks = static_cast<int>(ld / 8);
  const std::size_t total = n * static_cast<std::size_t>(chunks);
  const unsigned blocks = static_cast<unsigned>(total / 256 + 1 < 4096 ? total / 256 + 1 : 4096);
  scatter_rows_kernel<<<blocks, 256, 0, stream>>>(reinterpret_cast<const uint4*>(staged), slots,
                                                  static_cast<int>(n), chunks, reinterpret_cast<uint4*>(matrix),
                                                  valid);
  TG_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tidegate::kernels::detail
