// The CUDA flat index behind encoder::VectorIndex. The device holds the fp16 matrix and a validity
// byte per slot; the host keeps the slot <-> id map, so remove() is a one-byte write and freed
// slots are refilled by later adds.
#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "cuda_util.h"
#include "search.h"
#include "tidegate/kernels/gpu.h"
#include "tidegate/kernels/half.h"
#include "tidegate/kernels/slot_map.h"

namespace tidegate::kernels {
namespace {

using detail::DeviceBuffer;
using detail::PinnedBuffer;

constexpr std::size_t kTileRows = 64;          // the scoring kernel's row tile
constexpr std::size_t kInitialRows = 4096;
constexpr std::size_t kAddChunkRows = 1 << 16;  // bounds the staging memory of a bulk add

std::size_t round_up(std::size_t v, std::size_t m) { return (v + m - 1) / m * m; }

class GpuFlatIndex final : public encoder::VectorIndex {
 public:
  explicit GpuFlatIndex(std::size_t dim) : dim_(dim), ld_(round_up(dim, 16)) {
    TG_CUDA_CHECK(cudaSetDevice(0));
    for (std::size_t nq : {16, 32, 64}) plans_.push_back(detail::plan_search(ld_, nq, 0));
    if (plans_.front().qb == 0)
      throw std::invalid_argument("dim " + std::to_string(dim) + " needs more shared memory than device 0 has");
    grow(kInitialRows);
  }

  std::size_t dim() const override { return dim_; }
  std::size_t size() const override {
    std::lock_guard lock(mu_);
    return slots_.size();
  }

  void add(std::size_t n, const float* vectors, const std::int64_t* ids) override {
    std::lock_guard lock(mu_);
    std::unordered_set<std::int64_t> seen;
    for (std::size_t i = 0; i < n; ++i)
      if (slots_.slot_of(ids[i]) || !seen.insert(ids[i]).second)
        throw std::invalid_argument("duplicate id " + std::to_string(ids[i]) + " in gpu-flat add");
    for (std::size_t begin = 0; begin < n; begin += kAddChunkRows) {
      const std::size_t count = std::min(kAddChunkRows, n - begin);
      staged_rows_.reserve(count * ld_);
      staged_slots_.reserve(count);
      std::uint16_t* rows = staged_rows_.get();
      convert_rows(vectors + begin * dim_, count, rows);
      for (std::size_t i = 0; i < count; ++i)
        staged_slots_.get()[i] = static_cast<std::int32_t>(*slots_.assign(ids[begin + i]));
      if (slots_.used_slots() > capacity_) grow(slots_.used_slots());
      d_staged_rows_.reserve(count * ld_);
      d_staged_slots_.reserve(count);
      TG_CUDA_CHECK(cudaMemcpyAsync(d_staged_rows_.get(), rows, count * ld_ * 2, cudaMemcpyHostToDevice, stream_.get()));
      TG_CUDA_CHECK(cudaMemcpyAsync(d_staged_slots_.get(), staged_slots_.get(), count * 4, cudaMemcpyHostToDevice,
                                    stream_.get()));
      detail::launch_scatter_rows(d_staged_rows_.get(), d_staged_slots_.get(), count, ld_, matrix_.get(),
                                  valid_.get(), stream_.get());
      // The pinned staging buffers are reused by the next chunk.
      TG_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    }
  }

  bool remove(std::int64_t id) override {
    std::lock_guard lock(mu_);
    const auto slot = slots_.release(id);
    if (!slot) return false;
    TG_CUDA_CHECK(cudaMemsetAsync(valid_.get() + *slot, 0, 1, stream_.get()));
    return true;
  }

  std::vector<encoder::SearchHit> search(std::size_t nq, const float* queries, std::size_t k) const override {
    if (k > kGpuMaxK)
      throw std::invalid_argument("gpu-flat answers k <= " + std::to_string(kGpuMaxK) + ", asked " + std::to_string(k));
    std::vector<encoder::SearchHit> out(nq * k);
    if (nq == 0 || k == 0) return out;
    std::lock_guard lock(mu_);
    const std::size_t rows = slots_.used_slots();
    if (slots_.size() == 0) return out;
    const detail::SearchPlan& plan = nq <= 16 ? plans_[0] : nq <= 32 ? plans_[1] : plans_[2];
    const std::size_t qpad = round_up(nq, static_cast<std::size_t>(plan.qb));
    h_queries_.reserve(qpad * ld_);
    std::uint16_t* hq = h_queries_.get();
    std::fill(hq, hq + qpad * ld_, std::uint16_t{0});
    for (std::size_t q = 0; q < nq; ++q)
      for (std::size_t d = 0; d < dim_; ++d) hq[q * ld_ + d] = float_to_half_bits(queries[q * dim_ + d]);
    const std::size_t partials = nq * static_cast<std::size_t>(detail::search_blocks(plan, rows, nq)) * k;
    d_queries_.reserve(qpad * ld_);
    d_part_score_.reserve(partials);
    d_part_slot_.reserve(partials);
    d_out_score_.reserve(nq * k);
    d_out_slot_.reserve(nq * k);
    h_out_score_.reserve(nq * k);
    h_out_slot_.reserve(nq * k);
    cudaStream_t s = stream_.get();
    TG_CUDA_CHECK(cudaMemcpyAsync(d_queries_.get(), hq, qpad * ld_ * 2, cudaMemcpyHostToDevice, s));
    if (timing_) TG_CUDA_CHECK(cudaEventRecord(timing_->start, s));
    detail::launch_search(plan, matrix_.get(), valid_.get(), rows, ld_, d_queries_.get(), nq, k, d_part_score_.get(),
                          d_part_slot_.get(), d_out_score_.get(), d_out_slot_.get(), s);
    if (timing_) TG_CUDA_CHECK(cudaEventRecord(timing_->stop, s));
    TG_CUDA_CHECK(cudaMemcpyAsync(h_out_score_.get(), d_out_score_.get(), nq * k * 4, cudaMemcpyDeviceToHost, s));
    TG_CUDA_CHECK(cudaMemcpyAsync(h_out_slot_.get(), d_out_slot_.get(), nq * k * 4, cudaMemcpyDeviceToHost, s));
    TG_CUDA_CHECK(cudaStreamSynchronize(s));
    if (timing_) {
      float ms = 0;
      TG_CUDA_CHECK(cudaEventElapsedTime(&ms, timing_->start, timing_->stop));
      timing_->last_ms = ms;
    }
    for (std::size_t i = 0; i < nq * k; ++i) {
      const std::int32_t slot = h_out_slot_.get()[i];
      if (slot >= 0) out[i] = {slots_.id_at(static_cast<std::size_t>(slot)), h_out_score_.get()[i]};
    }
    return out;
  }

 void enable_timing() {
    std::lock_guard lock(mu_);
    if (!timing_) timing_ = std::make_unique<Timing>();
  }
  std::optional<double> last_kernel_ms() const {
    std::lock_guard lock(mu_);
    if (!timing_ || timing_->last_ms < 0) return std::nullopt;
    return timing_->last_ms;
  }

 private:
  // fp32 rows -> zero-padded fp16 rows. A bulk load (warm start, benchmarks) converts millions
  // of rows, so large chunks are split across threads.
  void convert_rows(const float* src, std::size_t count, std::uint16_t* dst) const {
    auto work = [&](std::size_t from, std::size_t to) {
      for (std::size_t i = from; i < to; ++i) {
        const float* v = src + i * dim_;
        std::uint16_t* out = dst + i * ld_;
        for (std::size_t d = 0; d < dim_; ++d) out[d] = float_to_half_bits(v[d]);
        std::fill(out + dim_, out + ld_, std::uint16_t{0});
      }
    };
    const std::size_t threads =
        count * dim_ < (std::size_t{1} << 22) ? 1 : std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 16);
    std::vector<std::thread> pool;
    const std::size_t per = (count + threads - 1) / threads;
    for (std::size_t t = 1; t < threads; ++t)
      pool.emplace_back(work, std::min(count, t * per), std::min(count, (t + 1) * per));
    work(0, std::min(count, per));
    for (auto& th : pool) th.join();
  }

  struct Timing {
    Timing() {
      TG_CUDA_CHECK(cudaEventCreate(&start));
      TG_CUDA_CHECK(cudaEventCreate(&stop));
    }
    Timing(const Timing&) = delete;
    Timing& operator=(const Timing&) = delete;
    ~Timing() {
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
    }
    cudaEvent_t start = nullptr, stop = nullptr;
    double last_ms = -1;
  };

  // Doubling keeps the amortised copy cost of growth linear; rows stay a multiple of the tile so
  // the kernel's last tile never reads past the allocation.
  void grow(std::size_t needed) {
    std::size_t cap = std::max<std::size_t>(capacity_, kInitialRows);
    while (cap < needed) cap *= 2;
    cap = round_up(cap, kTileRows);
    if (cap == capacity_) return;
    DeviceBuffer<std::uint16_t> m(cap * ld_);
    DeviceBuffer<std::uint8_t> v(cap);
    TG_CUDA_CHECK(cudaMemsetAsync(m.get(), 0, cap * ld_ * 2, stream_.get()));
    TG_CUDA_CHECK(cudaMemsetAsync(v.get(), 0, cap, stream_.get()));
    if (capacity_) {
      TG_CUDA_CHECK(cudaMemcpyAsync(m.get(), matrix_.get(), capacity_ * ld_ * 2, cudaMemcpyDeviceToDevice, stream_.get()));
      TG_CUDA_CHECK(cudaMemcpyAsync(v.get(), valid_.get(), capacity_, cudaMemcpyDeviceToDevice, stream_.get()));
    }
    TG_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    matrix_ = std::move(m);
    valid_ = std::move(v);
    capacity_ = cap;
  }

  const std::size_t dim_;
  const std::size_t ld_;
  detail::Stream stream_;
  std::vector<detail::SearchPlan> plans_;  // for batches of <=16, <=32 and more queries
  mutable std::mutex mu_;                  // one stream and shared scratch: one operation at a time
  SlotMap slots_;
  std::size_t capacity_ = 0;
  DeviceBuffer<std::uint16_t> matrix_;
  DeviceBuffer<std::uint8_t> valid_;
  PinnedBuffer<std::uint16_t> staged_rows_;
  PinnedBuffer<std::int32_t> staged_slots_;
  DeviceBuffer<std::uint16_t> d_staged_rows_;
  DeviceBuffer<std::int32_t> d_staged_slots_;
  mutable PinnedBuffer<std::uint16_t> h_queries_;
  mutable PinnedBuffer<float> h_out_score_;
  mutable PinnedBuffer<std::int32_t> h_out_slot_;
  mutable DeviceBuffer<std::uint16_t> d_queries_;
  mutable DeviceBuffer<float> d_part_score_;
  mutable DeviceBuffer<std::int32_t> d_part_slot_;
  mutable DeviceBuffer<float> d_out_score_;
  mutable DeviceBuffer<std::int32_t> d_out_slot_;
  std::unique_ptr<Timing> timing_;  // only when a benchmark asked for it
};

}  // namespace

bool enable_gpu_flat_kernel_timing(encoder::VectorIndex& index) {
  auto* gpu = dynamic_cast<GpuFlatIndex*>(&index);
  if (!gpu) return false;
  gpu->enable_timing();
  return true;
}

std::optional<double> gpu_flat_last_kernel_ms(const encoder::VectorIndex& index) {
  const auto* gpu = dynamic_cast<const GpuFlatIndex*>(&index);
  return gpu ? gpu->last_kernel_ms() : std::nullopt;
}

std::unique_ptr<encoder::VectorIndex> make_gpu_flat_index(std::size_t dim, std::string* why) {
  if (dim == 0 || dim % 8 != 0 || dim > 2048) {
    if (why) *why = "gpu-flat needs dim to be a positive multiple of 8, at most 2048 (got " + std::to_string(dim) + ")";
    return nullptr;
  }
  if (!gpu_available(why)) return nullptr;
  try {
    return std::make_unique<GpuFlatIndex>(dim);
  } catch (const std::exception& e) {
    if (why) *why = std::string("gpu-flat index creation failed: ") + e.what();
    return nullptr;
  }
}

}  // namespace tidegate::kernels
