// Pair verifier (issue 19): one lookup's verification (a prompt against 4 candidates, each side
// 16 tokens, so pairs of 31) on the GPU verifier, alone and from 16 and 64 concurrent lookups
// through its micro-batcher, against the CPU verifier on the same host with one caller thread per
// hardware thread (one intra-op thread each).
#include <atomic>
#include <filesystem>
#include <iostream>
#include <thread>

#include "bench.h"
#include "tidegate/kernels/gpu.h"

#if TIDEGATE_KERNELS_WITH_MINILM
#include "tidegate/encoder/minilm.h"
#include "tidegate/encoder/pair_verifier.h"
#endif

namespace tidegate::kernels::bench {

#if TIDEGATE_KERNELS_WITH_MINILM
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kCandidates = 4;

// `threads` lookups at a time, each verifying one prompt against kCandidates texts, for about
// min_time seconds: pairs verified per second.
double pairs_per_s(const encoder::PairScorer& v, const std::vector<std::string>& texts, unsigned threads,
                   double min_time) {
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  auto call = [&](std::size_t at) {
    std::vector<std::string> c;
    for (std::size_t k = 1; k <= kCandidates; ++k) c.push_back(texts[(at + k) % texts.size()]);
    v.verify(texts[at % texts.size()], c, deadline);
  };
  call(0);  // warm-up (allocations, cuBLAS heuristics)
  std::atomic<std::size_t> done{0};
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::size_t at = t * 31;
      do {
        call(at++);
        done += kCandidates;
      } while (std::chrono::duration<double>(Clock::now() - start).count() < min_time);
    });
  for (auto& th : pool) th.join();
  return static_cast<double>(done) / std::chrono::duration<double>(Clock::now() - start).count();
}

boost::json::object lookup_latency(const encoder::PairScorer& v, const std::vector<std::string>& texts,
                                   double min_time) {
  std::size_t at = 0;
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  const auto t = time_calls(
      [&] {
        std::vector<std::string> c;
        for (std::size_t k = 1; k <= kCandidates; ++k) c.push_back(texts[(at + k) % texts.size()]);
        v.verify(texts[at++ % texts.size()], c, deadline);
      },
      min_time);
  return to_json(t);
}

}  // namespace

boost::json::object run_verifier_bench(const Options& o) {
  const std::string verifier_dir = std::string(TIDEGATE_SOURCE_ROOT) + "/cache/verifier/model";
  if (!std::filesystem::exists(o.model_dir + "/model.safetensors"))
    return {{"skipped", "model not found at " + o.model_dir}};
  if (!std::filesystem::exists(verifier_dir + "/" + encoder::PairVerifier::kWeightsFile))
    return {{"skipped", "no verifier in " + verifier_dir}};
  auto model = encoder::MiniLMModel::load(o.model_dir);
  std::shared_ptr<const encoder::PairVerifier> cpu = encoder::PairVerifier::load(verifier_dir, model);
  const auto texts = make_prompts(model->tokenizer(), 16, 256);  // 14 pieces: pairs of 31 tokens
  const unsigned cpu_threads = std::max(1u, std::thread::hardware_concurrency());
  std::cerr << "kernels_bench: verifier\n";
  boost::json::object out{
      {"candidates", kCandidates},
      {"pair_tokens", cpu->encode(texts[0], texts[1]).ids.size()},
      {"cpu_verifier",
       {{"precision", cpu->precision()},
        {"one_lookup", lookup_latency(*cpu, texts, o.min_time_s)},
        {"caller_threads", cpu_threads},
        {"pairs_per_s", pairs_per_s(*cpu, texts, cpu_threads, o.min_time_s)}}}};
  std::string why = o.gpu_skip_reason;
  auto gpu = o.gpu ? make_gpu_pair_verifier(cpu, GpuVerifierOptions{}, &why) : nullptr;
  if (!gpu) {
    out["gpu_verifier"] = {{"skipped", why}};
    return out;
  }
  const GpuVerifierOptions defaults;
  out["gpu_verifier"] = {{"max_batch", defaults.max_batch},
                         {"max_wait_us", defaults.max_wait_us},
                         {"one_lookup", lookup_latency(*gpu, texts, o.min_time_s)},
                         {"pairs_per_s_16_concurrent_lookups", pairs_per_s(*gpu, texts, 16, o.min_time_s)},
                         {"pairs_per_s_64_concurrent_lookups", pairs_per_s(*gpu, texts, 64, o.min_time_s)}};
  return out;
}

#else

boost::json::object run_verifier_bench(const Options&) {
  return {{"skipped", "built without tidegate_encoder (the MiniLM loader)"}};
}

#endif

}  // namespace tidegate::kernels::bench
