#pragma once
// The GPU path behind the cache's interfaces: a CUDA flat inner-product index, a CUDA MiniLM
// encoder and the pair verifier on the same forward pass. Every factory answers nullptr plus a reason instead of throwing when the GPU
// path cannot run (built without CUDA, no device, no driver, model missing), so the caller can
// fall back to the CPU implementation with one log line.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "tidegate/encoder/embedder.h"
#include "tidegate/encoder/pair_verifier.h"
#include "tidegate/encoder/vector_index.h"

namespace tidegate::kernels {

// True when this binary was compiled with the CUDA kernels (TIDEGATE_HAVE_CUDA).
bool built_with_cuda();

// True when at least one CUDA device is usable. No driver (libcuda absent), an old driver or
// zero devices all answer false with `why` set; never throws, never aborts.
bool gpu_available(std::string* why);

struct DeviceInfo {
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  std::size_t memory_bytes = 0;
  // Measured cudaMemcpy device-to-device rate, counting bytes read plus bytes written (the
  // memory traffic a copy causes); 0 unless asked for. The bound a read-only scan can reach.
  double copy_gbps = 0;
};
// Device 0's properties; nullopt (with `why`) when gpu_available() is false.
std::optional<DeviceInfo> describe_device(bool measure_copy_bandwidth, std::string* why);

// Largest k the GPU index answers in one search (the per-warp top-k list is one warp wide).
inline constexpr std::size_t kGpuMaxK = 32;

// Flat inner-product index on device 0: vectors stored as fp16 (rows padded to a multiple of
// 16 elements), scores accumulated in fp32. dim must be a positive multiple of 8 and at most
// 2048. search() throws std::invalid_argument for k > kGpuMaxK and std::runtime_error on CUDA
// failures; add() throws std::invalid_argument on a duplicate id.
std::unique_ptr<encoder::VectorIndex> make_gpu_flat_index(std::size_t dim, std::string* why);

// For benchmarks: time each search's kernels with CUDA events (scan + merge, no transfers).
// Both answer false/nullopt when `index` is not a gpu-flat index or no search ran since enabling.
bool enable_gpu_flat_kernel_timing(encoder::VectorIndex& index);
std::optional<double> gpu_flat_last_kernel_ms(const encoder::VectorIndex& index);

struct GpuEncoderOptions {
  // Upper bound on sequences run as one forward pass; larger embed() calls are split.
  std::size_t max_batch = 64;
  // How long the batcher waits for more concurrent calls after the first one arrives.
  std::size_t max_wait_us = 300;
  // 0 keeps the model's max_seq_length (256); a smaller value truncates earlier.
  std::size_t max_seq_length = 0;
};

// all-MiniLM-L6-v2 forward pass on device 0: fp16 weights and activations, cuBLAS GEMMs with fp32
// accumulation and fused kernels, fed by a
// micro-batcher thread that owns the CUDA stream. name() is "minilm-gpu"; dim() is 384.
// embed() is thread-safe and throws std::runtime_error when the deadline passes first.
std::unique_ptr<encoder::Embedder> make_gpu_minilm_embedder(const std::string& model_dir,
                                                          const GpuEncoderOptions& options,
                                                          std::string* why);

struct GpuVerifierOptions {
  // Upper bound on pairs run as one forward pass (a lookup brings `candidates` pairs, default 4).
  std::size_t max_batch = 64;
  // How long the batcher waits for more concurrent lookups after the first one arrives. Shorter
  // than the encoder's: a lookup waits for the verifier after it has waited for its embedding.
  std::size_t max_wait_us = 200;
};

// The pair verifier (issue 19) on device 0: `cpu`'s weights (its layers, token types and head)
// uploaded as fp16 and run by the encoder's kernels with each pair's token types; the [CLS] row
// goes through the head on the host in double, as on the CPU. Concurrent verify() calls are
// batched into one forward pass. `cpu` keeps tokenising (on the caller's thread) and its word
// and position embeddings are the base model's. name() is "pair-verifier-gpu". verify() is
// thread-safe and throws std::runtime_error when the deadline passes first (the cache then
// misses: fail open).
std::unique_ptr<encoder::PairScorer> make_gpu_pair_verifier(std::shared_ptr<const encoder::PairVerifier> cpu,
                                                          const GpuVerifierOptions& options, std::string* why);

}  // namespace tidegate::kernels
