// Cost of the request path: one streamed request = start, N cumulative progress reports, finish,
// with `concurrency` requests sharing each replica (the shape continuous batching produces).
#include <benchmark/benchmark.h>
#include <prometheus/registry.h>
#include <yaml-cpp/yaml.h>

#include <vector>

#include "tidegate/cost/accounting.h"

namespace {

using namespace tidegate::cost;

void BM_StreamedRequests(benchmark::State& state) {
  const int concurrency = static_cast<int>(state.range(0));
  const int chunks = static_cast<int>(state.range(1));
  prometheus::Registry registry;
  auto acc = make_cost_accounting(
      parse_cost_config(YAML::Load("replica_classes: {gpu: {usd_per_hour: 4}}\nmodels: {m: gpu}\n"), "cost"), registry);
  acc->replica_state("r", "m", "", tidegate::ReplicaState::kActive, 0);
  const RequestLabels labels{"m", "acme", "k", {}};
  double t = 1;
  std::vector<std::uint64_t> live;
  for (int i = 0; i < concurrency; ++i) live.push_back(acc->request_started(labels, "r", t));
  std::int64_t requests = 0;
  for (auto _ : state) {
    // Each slot advances one chunk; the oldest finishes and is replaced, keeping the batch full.
    for (int c = 0; c < chunks; ++c) {
      t += 0.001;
      for (int i = 0; i < concurrency; ++i) acc->request_progress(live[i], 100, c + 1, t);
    }
    for (int i = 0; i < concurrency; ++i) {
      benchmark::DoNotOptimize(acc->request_finished(live[i], t));
      live[i] = acc->request_started(labels, "r", t);
    }
    requests += concurrency;
  }
  state.SetItemsProcessed(requests);
  state.counters["reports_per_s"] =
      benchmark::Counter(static_cast<double>(requests) * chunks, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_StreamedRequests)->Args({1, 50})->Args({16, 50})->Args({64, 50});

}  // namespace

BENCHMARK_MAIN();
