// Encoder: prompts/s of the GPU MiniLM at forward-pass batch 1, 8, 64 for prompts of exactly 16
// and 64 tokens ([CLS] and [SEP] included), against the CPU MiniLM on the same host with one
// caller thread per hardware thread (each with single-threaded BLAS), plus 64 concurrent
// single-prompt callers through the GPU micro-batcher.
#include <atomic>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>

#include "bench.h"
#include "tidegate/kernels/gpu.h"

#if TIDEGATE_KERNELS_WITH_MINILM
#include "tidegate/encoder/minilm.h"
#endif

namespace tidegate::kernels::bench {

#if TIDEGATE_KERNELS_WITH_MINILM
std::vector<std::string> make_prompts(const encoder::WordPieceTokenizer& tok, std::size_t tokens, std::size_t count) {
  static const char* kWords[] = {"the", "cat", "sat", "on", "mat", "how", "do", "i", "make", "a", "good", "cake",
                                 "what", "is", "time", "water", "city", "money", "book", "light", "green", "house",
                                 "music", "fast", "car", "open", "door", "world", "people", "day", "night", "code"};
  std::vector<std::string> single;
  for (const char* w : kWords)
    if (tok.tokenize(w).size() == 1) single.emplace_back(w);
  std::mt19937 rng(static_cast<unsigned>(tokens));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < count; ++i) {
    std::string p;
    for (std::size_t w = 0; w + 2 < tokens; ++w) p += (w ? " " : "") + single[rng() % single.size()];
    if (tok.encode(p, 512).size() != tokens) throw std::logic_error("prompt length mismatch");
    out.push_back(std::move(p));
  }
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> slice(const std::vector<std::string>& pool, std::size_t at, std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(pool[(at + i) % pool.size()]);
  return out;
}

// `threads` callers each embedding `batch` prompts per call for about min_time seconds.
double prompts_per_s(encoder::Embedder& e, const std::vector<std::string>& pool, std::size_t batch, unsigned threads,
                     double min_time) {
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  e.embed(slice(pool, 0, batch), deadline);  // warm-up (allocations, cuBLAS heuristics)
  std::atomic<std::size_t> done{0};
  const auto start = Clock::now();
  std::vector<std::thread> pool_threads;
  for (unsigned t = 0; t < threads; ++t)
    pool_threads.emplace_back([&, t] {
      std::size_t at = t * 97;
      do {
        e.embed(slice(pool, at, batch), deadline);
        at += batch;
        done += batch;
      } while (std::chrono::duration<double>(Clock::now() - start).count() < min_time);
    });
  for (auto& th : pool_threads) th.join();
  return static_cast<double>(done) / std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

boost::json::object run_encoder_bench(const Options& o) {
  if (!std::filesystem::exists(o.model_dir + "/model.safetensors"))
    return {{"skipped", "model not found at " + o.model_dir}};
  auto model = encoder::MiniLMModel::load(o.model_dir);
  const unsigned cpu_threads = std::max(1u, std::thread::hardware_concurrency());
  auto cpu = encoder::make_minilm_embedder(model, encoder::MiniLMOptions{});
  boost::json::array gpu_rows, cpu_rows;
  std::string why = o.gpu_skip_reason;
  for (const std::size_t tokens : o.encoder_tokens) {
    const auto pool = make_prompts(model->tokenizer(), tokens, 512);
    for (const std::size_t b : o.encoder_batches) {
      std::cerr << "kernels_bench: encoder, " << tokens << " tokens, batch " << b << "\n";
      if (o.gpu) {
        // max_batch = b and no wait window: each call is exactly one forward pass of b prompts.
        auto gpu = make_gpu_minilm_embedder(o.model_dir, GpuEncoderOptions{b, 0, 0}, &why);
        if (gpu)
          gpu_rows.push_back({{"tokens", tokens}, {"batch", b},
                              {"prompts_per_s", prompts_per_s(*gpu, pool, b, 1, o.min_time_s)}});
      }
      cpu_rows.push_back({{"tokens", tokens}, {"batch", b}, {"caller_threads", cpu_threads},
                          {"prompts_per_s", prompts_per_s(*cpu, pool, b, cpu_threads, o.min_time_s)}});
    }
  }
  boost::json::object out{{"cpu_minilm", std::move(cpu_rows)}};
  if (!o.gpu || gpu_rows.empty()) {
    out["gpu_minilm"] = {{"skipped", why}};
    return out;
  }
  out["gpu_minilm"] = std::move(gpu_rows);
  // Micro-batching under concurrency: 64 callers with one prompt each, default window.
  auto batched = make_gpu_minilm_embedder(o.model_dir, GpuEncoderOptions{}, &why);
  if (batched) {
    const auto pool = make_prompts(model->tokenizer(), o.encoder_tokens.front(), 512);
    out["gpu_minilm_64_concurrent_single_prompt_callers"] = {
        {"tokens", o.encoder_tokens.front()}, {"max_batch", 64}, {"max_wait_us", 300},
        {"prompts_per_s", prompts_per_s(*batched, pool, 1, 64, o.min_time_s)}};
  }
  return out;
}

#else

boost::json::object run_encoder_bench(const Options&) {
  return {{"skipped", "built without tidegate_encoder (the MiniLM loader)"}};
}

#endif

}  // namespace tidegate::kernels::bench
