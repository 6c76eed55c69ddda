// CPU encoder latency: short prompts (the cache's common case) at batch 1, 8 and 32, one
// OpenBLAS thread per call as in production (the worker pool provides the parallelism).
// Model folder: $TIDEGATE_MINILM_DIR or <repo>/third_party/models/all-MiniLM-L6-v2.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <algorithm>
#include <iostream>
#include <stdexcept>

#include "tidegate/encoder/hash_embedder.h"
#include "tidegate/encoder/minilm.h"

namespace {

using tidegate::encoder::Embedder;

const std::vector<std::string>& prompts() {
  static const std::vector<std::string> p = {
      "What is the capital of France?",
      "How do I reset my password on the web portal?",
      "Explain the difference between TCP and UDP in two sentences.",
      "Write a haiku about autumn leaves.",
      "Translate 'good morning' into Spanish and German.",
      "What are the side effects of ibuprofen?",
      "Summarise the plot of Hamlet briefly.",
      "Give me three ideas for a birthday party theme.",
  };
  return p;
}

std::vector<std::string> batch_of(std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(prompts()[i % prompts().size()] + " #" + std::to_string(i));
  return out;
}

std::shared_ptr<const tidegate::encoder::MiniLMModel> model() {
  static auto m = [] {
    const char* env = std::getenv("TIDEGATE_MINILM_DIR");
    return tidegate::encoder::MiniLMModel::load(env ? env : std::string(TIDEGATE_SOURCE_ROOT) + "/third_party/models/all-MiniLM-L6-v2");
  }();
  return m;
}

void run(benchmark::State& state, Embedder& embedder) {
  const auto texts = batch_of(static_cast<std::size_t>(state.range(0)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
  for (auto _ : state) benchmark::DoNotOptimize(embedder.embed(texts, deadline));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// The default precision (bf16 where the CPU has AVX512-BF16, on its matrix tiles where it has
// them), then fp32 beside it.
void BM_MiniLM(benchmark::State& state) {
  static auto embedder = tidegate::encoder::make_minilm_embedder(model());
  state.counters["matrix_tiles"] = tidegate::encoder::minilm_arithmetic({}).matrix_tiles ? 1 : 0;
  run(state, *embedder);
}
BENCHMARK(BM_MiniLM)->Arg(1)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond)->UseRealTime();

// bf16 on AVX512-BF16's dot instruction where the default runs on the CPU's matrix tiles (AMX):
// the peer of the tile kernel, in the same run (equal to the default on a CPU without tiles).
// One embedder shared by the benchmarks that use it.
Embedder& dot_kernel_embedder() {
  static auto embedder = [] {
    tidegate::encoder::MiniLMOptions options;
    options.matrix_tiles = false;
    return tidegate::encoder::make_minilm_embedder(model(), options);
  }();
  return *embedder;
}

void BM_MiniLM_bf16_dot(benchmark::State& state) { run(state, dot_kernel_embedder()); }
BENCHMARK(BM_MiniLM_bf16_dot)->Arg(1)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MiniLM_fp32(benchmark::State& state) {
  static auto embedder = [] {
    tidegate::encoder::MiniLMOptions options;
    options.precision = tidegate::encoder::MiniLMPrecision::kFp32;
    return tidegate::encoder::make_minilm_embedder(model(), options);
  }();
  run(state, *embedder);
}
BENCHMARK(BM_MiniLM_fp32)->Arg(1)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond)->UseRealTime();

// The default precision with one call's layers split over two threads (intra_op_threads: 2),
// one embedder shared by the benchmarks that use it.
Embedder& two_thread_embedder() {
  static auto embedder = [] {
    tidegate::encoder::MiniLMOptions options;
    options.intra_op_threads = 2;
    return tidegate::encoder::make_minilm_embedder(model(), options);
  }();
  return *embedder;
}

void BM_MiniLM_2threads(benchmark::State& state) { run(state, two_thread_embedder()); }
BENCHMARK(BM_MiniLM_2threads)->Arg(1)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond)->UseRealTime();

// One prompt of exactly state.range(0) tokens ([CLS] and [SEP] included): the cache's latency
// target is stated for prompts under 32 tokens, and the encoder's cost grows with length.
std::string prompt_of_tokens(std::size_t tokens) {
  static const std::string words =
      "can you explain how a hash map handles collisions what open addressing is and when chaining is the "
      "better choice for a small table that is read far more often than it is written in practice";
  const auto& tok = model()->tokenizer();
  std::string text;
  std::size_t pos = 0;
  while (tok.encode(text, 512).size() < tokens && pos < words.size()) {
    const std::size_t end = std::min(words.find(' ', pos), words.size());
    if (!text.empty()) text += ' ';
    text.append(words, pos, end - pos);
    pos = end + 1;
  }
  if (tok.encode(text, 512).size() != tokens) throw std::logic_error("bench: no prompt of that many tokens");
  return text;
}

void run_length(benchmark::State& state, Embedder& embedder) {
  const std::vector<std::string> texts = {prompt_of_tokens(static_cast<std::size_t>(state.range(0)))};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
  for (auto _ : state) benchmark::DoNotOptimize(embedder.embed(texts, deadline));
  state.counters["tokens"] = static_cast<double>(state.range(0));
}

void BM_MiniLM_tokens(benchmark::State& state) {
  static auto embedder = tidegate::encoder::make_minilm_embedder(model());
  run_length(state, *embedder);
}
BENCHMARK(BM_MiniLM_tokens)->Arg(8)->Arg(16)->Arg(24)->Arg(31)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MiniLM_tokens_2threads(benchmark::State& state) { run_length(state, two_thread_embedder()); }
BENCHMARK(BM_MiniLM_tokens_2threads)->Arg(8)->Arg(16)->Arg(24)->Arg(31)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MiniLM_tokens_bf16_dot(benchmark::State& state) { run_length(state, dot_kernel_embedder()); }
BENCHMARK(BM_MiniLM_tokens_bf16_dot)->Arg(8)->Arg(16)->Arg(24)->Arg(31)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Tokenize(benchmark::State& state) {
  const auto& tok = model()->tokenizer();
  for (auto _ : state) {
    for (const auto& p : prompts()) benchmark::DoNotOptimize(tok.encode(p, 256));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(prompts().size()));
}
BENCHMARK(BM_Tokenize)->Unit(benchmark::kMicrosecond);

void BM_Hash(benchmark::State& state) {
  static auto embedder = tidegate::encoder::make_hash_embedder();
  run(state, *embedder);
}
BENCHMARK(BM_Hash)->Arg(1)->Arg(32)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
