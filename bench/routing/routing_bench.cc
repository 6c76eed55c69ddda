// Per-request cost of balancer: prefix_aware against the least-loaded-of-two choice it falls
// back to, on the gateway's path: hash a 4k-token prompt (16 KiB of `messages`, about 4 bytes
// a token), match it against 8 replicas' indexes (full: 3,125 blocks of 512 bytes each, the default size for
// a 400k-token KV cache), choose, record. Also the index's memory per replica (heap delta).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <random>
#include <string>
#include <vector>

#include "tidegate/routing/prefix_aware.h"
#include "tidegate/routing/prompt_blocks.h"

namespace {

using namespace tidegate::routing;

constexpr int kReplicas = 8;
constexpr std::size_t kIndexBlocks = 400000 * 4 / 512;  // the gateway default

std::string prompt_of(int conversation, std::size_t bytes) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(conversation));
  std::string s = R"([{"role":"system","content":")";
  while (s.size() < bytes) s.push_back(static_cast<char>('a' + rng() % 26));
  return s;
}

struct Fleet {
  std::vector<PrefixIndex> indexes;
  std::vector<Candidate> candidates;
  std::vector<std::string> prompts;
  Fleet() : indexes(kReplicas, PrefixIndex(kIndexBlocks)), candidates(kReplicas) {
    // Fill every index with other conversations' prompts, then hold 64 conversations whose
    // next turns the benchmark sends.
    std::vector<std::uint64_t> blocks;
    for (int c = 0; c < kReplicas * 120; ++c) {
      prompt_blocks(prompt_of(100000 + c, 16384), {}, blocks);
      indexes[c % kReplicas].insert(blocks);
    }
    for (int c = 0; c < 64; ++c) {
      prompts.push_back(prompt_of(c, 16384));
      prompt_blocks(prompts.back().substr(0, 12000), {}, blocks);
      indexes[c % kReplicas].insert(blocks);
    }
    for (int i = 0; i < kReplicas; ++i) candidates[i].outstanding = i % 3;
  }
};

void BM_PrefixAware4kTokens(benchmark::State& state) {
  static Fleet fleet;
  std::vector<std::uint64_t> blocks;
  const PrefixAwareConfig cfg;
  const PromptBlocksConfig pb{static_cast<std::size_t>(state.range(0)), 1u << 20};
  std::uint64_t n = 0;
  for (auto _ : state) {
    const auto& prompt = fleet.prompts[n % fleet.prompts.size()];
    prompt_blocks(prompt, pb, blocks);
    for (int i = 0; i < kReplicas; ++i) fleet.candidates[i].matched_blocks = fleet.indexes[i].match(blocks);
    const auto choice = choose_prefix_aware(cfg, fleet.candidates, n * 0x9e3779b97f4a7c15ULL);
    fleet.indexes[choice.index].insert(blocks);
    benchmark::DoNotOptimize(choice);
    ++n;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 16384);
}
BENCHMARK(BM_PrefixAware4kTokens)->Arg(128)->Arg(256)->Arg(512);

void BM_HashOnly4kTokens(benchmark::State& state) {
  const auto prompt = prompt_of(1, 16384);
  std::vector<std::uint64_t> blocks;
  const PromptBlocksConfig pb{static_cast<std::size_t>(state.range(0)), 1u << 20};
  for (auto _ : state) benchmark::DoNotOptimize(prompt_blocks(prompt, pb, blocks));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 16384);
}
BENCHMARK(BM_HashOnly4kTokens)->Arg(128)->Arg(256)->Arg(512);

void BM_LeastLoadedOfTwo(benchmark::State& state) {
  std::vector<Candidate> c(kReplicas);
  for (int i = 0; i < kReplicas; ++i) c[i].outstanding = i % 3;
  std::uint64_t n = 0;
  for (auto _ : state) benchmark::DoNotOptimize(least_loaded_of_two(c, ++n * 0x9e3779b97f4a7c15ULL));
}
BENCHMARK(BM_LeastLoadedOfTwo);

void BM_IndexMemoryPerReplica(benchmark::State& state) {
  for (auto _ : state) {
    const auto before = mallinfo2().uordblks;
    {
      PrefixIndex index(kIndexBlocks);
      std::vector<std::uint64_t> blocks;
      for (int c = 0; index.size() < kIndexBlocks; ++c) {
        prompt_blocks(prompt_of(c, 16384), {}, blocks);
        index.insert(blocks);
      }
      state.counters["bytes_per_replica"] = static_cast<double>(mallinfo2().uordblks - before);
      state.counters["bytes_per_block"] = static_cast<double>(mallinfo2().uordblks - before) / kIndexBlocks;
    }
  }
}
BENCHMARK(BM_IndexMemoryPerReplica)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
