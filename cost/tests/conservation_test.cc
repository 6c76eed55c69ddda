// A long randomized run: thousands of requests on many replicas with random lifecycle changes,
// streams and non-streams, failures, clock jumps, cache hits and paid-API calls. Every dollar of
// the bill must land in exactly one place.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <random>

#include "test_util.h"

namespace tidegate::cost {
namespace {

using testing::metric_sum;

struct Live {
  std::uint64_t handle;
  bool stream;
  std::int64_t prompt, completion, produced;
  double end;
};

TEST(Conservation, RandomizedLongRunAddsUpToTheBill) {
  prometheus::Registry registry;
  auto acc = make_cost_accounting(testing::config_from(R"(
replica_classes:
  h100: {usd_per_hour: 4.0}
  a10-spot: {usd_per_hour: 0.9, state_fraction: {starting: 0.5, warm: 0.7}}
models: {llama: h100, mistral: a10-spot, qwen: h100}
api_models:
  gpt-4o-mini: {input_usd_per_1m: 0.15, output_usd_per_1m: 0.6}
tags: {labels: [team], max_values: 3}
)"),
                                  registry);
  std::mt19937_64 rng(20261130);
  const std::vector<std::string> models{"llama", "mistral", "qwen"};
  const std::vector<std::string> tenants{"acme", "globex", "initech", "umbrella"};
  const std::vector<ReplicaState> states{ReplicaState::kStarting, ReplicaState::kWarm, ReplicaState::kActive,
                                         ReplicaState::kDraining, ReplicaState::kStopped};
  std::vector<std::string> replicas;
  for (int i = 0; i < 24; ++i) replicas.push_back("r" + std::to_string(i));
  auto model_of = [&](std::size_t i) { return models[i % models.size()]; };
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };

  double t = 1'790'000'000.0;
  for (std::size_t i = 0; i < replicas.size(); ++i)
    acc->replica_state(replicas[i], model_of(i), "", ReplicaState::kActive, t);

  std::vector<Live> live;
  double returned = 0;
  int started = 0;
  const int kRequests = 4000;
  while (started < kRequests || !live.empty()) {
    t += uni(0, 0.05);
    double now = t;
    if (pick(500) == 0) now = t - uni(0, 30);  // a clock jump backwards for this event only
    const auto roll = pick(100);
    if (roll < 2) {  // lifecycle change
      const auto r = pick(replicas.size());
      acc->replica_state(replicas[r], model_of(r), "", states[pick(states.size())], now);
    } else if (roll < 4) {
      acc->cache_hit({models[pick(3)], tenants[pick(4)], "k", {}}, 100, 50, now, nullptr);
    } else if (roll < 30 && started < kRequests) {
      const auto r = pick(replicas.size());
      RequestLabels labels{model_of(r), tenants[pick(tenants.size())], "k", {{"team", "t" + std::to_string(pick(6))}}};
      const bool api = pick(20) == 0;
      if (api) labels.model = "gpt-4o-mini";
      Live l{acc->request_started(labels, api ? "openai" : replicas[r], now), pick(2) == 0,
             static_cast<std::int64_t>(10 + pick(2000)), static_cast<std::int64_t>(pick(500)), 0, t + uni(0.05, 8)};
      live.push_back(l);
      ++started;
    } else if (!live.empty()) {
      const auto i = pick(live.size());
      Live& l = live[i];
      if (t < l.end) {
        if (l.stream && l.completion > 0) {
          l.produced = std::min(l.completion, l.produced + 1 + static_cast<std::int64_t>(pick(20)));
          acc->request_progress(l.handle, l.prompt, l.produced, now);
        }
        continue;
      }
      const bool fails = pick(10) == 0;
      if (!fails) acc->request_progress(l.handle, l.prompt, l.completion, now);
      const double c = acc->request_finished(l.handle, now);
      ASSERT_GE(c, 0.0);
      returned += c;
      live[i] = live.back();
      live.pop_back();
    }
  }
  t += 10;
  for (std::size_t i = 0; i < replicas.size(); ++i) acc->replica_state(replicas[i], model_of(i), "", ReplicaState::kStopped, t);
  acc->advance(t + 100);

  const auto tot = acc->totals();
  ASSERT_GT(tot.bill_usd, 0.5);
  EXPECT_EQ(tot.in_flight, 0u);
  EXPECT_NEAR(tot.pending_usd, 0.0, 1e-9 * tot.bill_usd);
  const double attributed = tot.request_usd + tot.idle_usd + tot.standby_usd;
  EXPECT_NEAR(attributed / tot.bill_usd, 1.0, 1e-6);
  // Request costs as returned one by one (plus cache lookups) are the request share of the bill.
  EXPECT_NEAR((returned + 0.00001 * tot.cache_hits) / tot.request_usd, 1.0, 1e-6);
  // The metrics say the same.
  const double bill_metric = metric_sum(registry, "tidegate_replica_cost_usd_total");
  EXPECT_NEAR(bill_metric / tot.bill_usd, 1.0, 1e-6);
  EXPECT_NEAR(metric_sum(registry, "tidegate_cost_usd_total") / bill_metric, 1.0, 1e-6);
  // And so does a report over the whole run, whichever way it is cut.
  for (const char* by : {"tenant", "model"}) {
    const auto rep = boost::json::parse(acc->report(by, std::nullopt, std::nullopt, "json").first).as_object();
    double rows = 0;
    for (const auto& row : rep.at("rows").as_array())
      rows += row.at("cost_usd").to_number<double>() + (std::string(by) == "model"
                                                             ? row.at("idle_usd").to_number<double>() +
                                                                   row.at("standby_usd").to_number<double>()
                                                             : 0.0);
    EXPECT_NEAR(rows / tot.bill_usd, 1.0, 1e-6) << by;
    EXPECT_NEAR(rep.at("totals").at("bill_usd").to_number<double>() / tot.bill_usd, 1.0, 1e-6) << by;
  }
  EXPECT_GT(tot.clock_regressions, 0u);
  EXPECT_GT(tot.estimated_members, 0u);
  EXPECT_GT(tot.idle_usd, 0.0);
  EXPECT_GT(tot.standby_usd, 0.0);
}

}  // namespace
}  // namespace tidegate::cost
