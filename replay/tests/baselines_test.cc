#include <gtest/gtest.h>

#include <cmath>

#include "synthetic.h"
#include "tidegate/common/config_error.h"
#include "tidegate/replay/baselines.h"
#include "tidegate/replay/cli.h"
#include "tidegate/replay/suite.h"

namespace tidegate::replay {
namespace {

ClusterObservation obs(double t, int active, std::size_t in_flight, std::size_t queue = 0, double period = 1) {
  ClusterObservation o;
  o.t = t;
  o.period_s = period;
  o.active = active;
  o.in_flight = in_flight;
  o.queue_depth = queue;
  o.slots_per_replica = 10;
  o.capacity_per_replica = 10;
  return o;
}

TEST(Hpa, HandComputedDecisions) {
  HpaPolicy hpa(HpaConfig{});
  // 4 replicas x 10 slots, 42 in flight: utilisation 1.05 against 0.7 -> ceil(4 * 1.5) = 6.
  hpa.observe(obs(15, 4, 42, 0, 15));
  EXPECT_EQ(hpa.decide(obs(15, 4, 42)).active, 6);
  // 29 in flight on 4: 0.725 / 0.7 = 1.036, inside the 10 % tolerance -> hold.
  hpa.observe(obs(30, 4, 29, 0, 15));
  EXPECT_EQ(hpa.decide(obs(30, 4, 29)).active, 4);
  // Idle on 6: raw recommendation 1, but the 6 from t=15 is inside the 300 s window.
  hpa.observe(obs(45, 6, 0, 0, 15));
  EXPECT_EQ(hpa.decide(obs(45, 6, 0)).active, 6);
  // Once t=15 and t=30 leave the window, the highest recommendation left is 1.
  hpa.observe(obs(331, 6, 0, 0, 15));
  EXPECT_EQ(hpa.decide(obs(331, 6, 0)).active, 1);
}

TEST(Hpa, ScaleUpIsLimitedToDoubleOrFourPods) {
  HpaPolicy hpa(HpaConfig{});
  // 1 replica, 100 in flight: utilisation 10 -> ceil(1 * 14.3) = 15, limited to max(1+4, 2) = 5.
  hpa.observe(obs(15, 1, 100, 0, 15));
  EXPECT_EQ(hpa.decide(obs(15, 1, 100)).active, 5);
}

TEST(Kpa, StablePanicAndScaleDownRate) {
  KpaConfig cfg;
  cfg.target_concurrency = 10;  // 7 per replica at 70 %
  KpaPolicy kpa(cfg);
  double t = 0;
  ScaleTarget d;
  for (int i = 0; i < 60; ++i) {
    kpa.observe(obs(++t, 10, 70));
    d = kpa.decide(obs(t, 10, 70));
  }
  EXPECT_EQ(d.active, 10);  // 70 / 7
  EXPECT_FALSE(kpa.in_panic());
  // A burst: 6 s at 280 -> panic window wants 40 = 4x the 10 ready (>= 200 %): panic.
  for (int i = 0; i < 6; ++i) {
    kpa.observe(obs(++t, 10, 200, 80));
    d = kpa.decide(obs(t, 10, 200, 80));
  }
  EXPECT_TRUE(kpa.in_panic());
  EXPECT_EQ(d.active, 40);
  // Demand vanishes: panic holds 40 (never scales down) until a stable window passes.
  for (int i = 0; i < 30; ++i) {
    kpa.observe(obs(++t, 40, 0));
    d = kpa.decide(obs(t, 40, 0));
  }
  EXPECT_TRUE(kpa.in_panic());
  EXPECT_EQ(d.active, 40);
  for (int i = 0; i < 40; ++i) {
    kpa.observe(obs(++t, 40, 0));
    d = kpa.decide(obs(t, 40, 0));
  }
  EXPECT_FALSE(kpa.in_panic());
  EXPECT_EQ(d.active, 20);  // max scale-down rate 2: at most halve per decision
}

TEST(Pareto, KeepsOnlyNonDominated) {
  const std::vector<std::pair<double, double>> pts{{1, 0.9}, {2, 0.95}, {2, 0.8}, {3, 0.95}, {0.5, 0.5}};
  EXPECT_EQ(pareto_frontier(pts), (std::vector<std::size_t>{4, 0, 1}));
}

TEST(Tuner, ChoosesOnTheFirstPartAndValidatesOnTheRest) {
  const auto trace = testing::synthetic_trace(900, 4, 800, 60);
  ReplayConfig cfg = default_config();
  cfg.options.profile.cold_start_s = 30;
  cfg.options.replicas_max = 8;
  cfg.options.slo.attainment = 0.9;
  align_policy(cfg);
  TunerGrid grid;
  grid.headroom = {0.5, 1.0, 2.0};
  grid.burst_memory_s = {600};
  grid.noise_z = {3};
  grid.scale_down_stabilization_s = {0};
  grid.warm_pool_size = {0, 1};
  const auto r = tune(trace, cfg, grid, 2);
  ASSERT_EQ(r.all.size(), 6u);
  EXPECT_NEAR(r.tune_until_s, trace.duration_s() * 2 / 3, 1e-9);
  ASSERT_FALSE(r.frontier.empty());
  for (const auto& f : r.frontier)
    for (const auto& p : r.all) {
      const bool dominates = p.summary.gpu_hours <= f.summary.gpu_hours &&
                             p.summary.ttft_slo_attainment >= f.summary.ttft_slo_attainment &&
                             (p.summary.gpu_hours < f.summary.gpu_hours ||
                              p.summary.ttft_slo_attainment > f.summary.ttft_slo_attainment);
      EXPECT_FALSE(dominates);
    }
  // Every point was replayed on the tuning part only: fewer requests than the trace.
  for (const auto& p : r.all) EXPECT_LT(p.summary.requests, trace.requests.size());
  ASSERT_GE(r.cheapest_meeting_slo, 0);
  const auto& best = r.all[static_cast<std::size_t>(r.cheapest_meeting_slo)];
  EXPECT_TRUE(best.robust);
  for (const auto& p : r.all)
    if (p.robust) {
      EXPECT_GE(p.summary.gpu_hours, best.summary.gpu_hours - 1e-12);
    }
  // The held-back part is the rest of the trace, replayed with the choice and the default.
  ASSERT_TRUE(r.held_back && r.held_back_default && r.held_back_static);
  EXPECT_EQ(r.held_back->requests + best.summary.requests, trace.requests.size());
  EXPECT_GT(r.held_back->gpu_hours_vs_static, 0);
  // The printed snippet is a config the tool reads back to the same setting.
  const auto back = load_config_text(policy_yaml(best.config), default_config());
  EXPECT_EQ(back.tidegate.policy.headroom, best.config.policy.headroom);
  EXPECT_EQ(back.tidegate.policy.burst_memory_s, best.config.policy.burst_memory_s);
  EXPECT_EQ(back.tidegate.warm_pool_size, best.config.warm_pool_size);
}

TEST(StaticSearch, FindsTheSmallestFleetThatMeetsTheSlo) {
  const auto trace = testing::synthetic_trace(400, 12, 1500, 80);
  ReplayOptions o = default_config().options;
  o.replicas_max = 12;
  const auto r = cheapest_static(trace, o);
  ASSERT_TRUE(r.found);
  EXPECT_TRUE(r.summary.meets_slo(o.slo));
  EXPECT_GT(r.replicas, 1);  // 18k prompt tokens/s is beyond one replica's 8k/s prefill
  bool tried_smaller = false;
  for (const auto& s : r.tried)
    if (s.policy == "static-" + std::to_string(r.replicas - 1)) {
      tried_smaller = true;
      EXPECT_FALSE(s.meets_slo(o.slo));
    }
  EXPECT_TRUE(tried_smaller);
}

TEST(Config, UnknownKeysAndBadValuesNameTheLine) {
  try {
    load_config_text("replay:\n  slo:\n    ttft: 1s\n    ttfx: 2s\n", default_config());
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.line(), 4) << e.what();
  }
  EXPECT_THROW(load_config_text("policy:\n  panic_threshold: 0.5\n", default_config()), ConfigError);
  const auto c = load_config_text(
      "replay:\n  profile:\n    cold_start: 2m\n    max_num_batched_tokens: 8192\n    decode_per_kv_token: 51ns\n"
      "  replicas: {min: 2, max: 9}\n  slo: {ttft: 5s}\npolicy:\n  targets:\n"
      "    concurrency_per_replica: 24\n    kv_usage: 0.8\n",
      default_config());
  EXPECT_DOUBLE_EQ(c.options.profile.cold_start_s, 120);
  EXPECT_EQ(c.options.profile.timing.max_num_batched_tokens, 8192);
  EXPECT_DOUBLE_EQ(c.options.profile.timing.decode_per_kv_token_s, 51e-9);
  EXPECT_EQ(c.tidegate.policy.max_replicas, 9);
  EXPECT_EQ(c.tidegate.policy.targets.concurrency_per_replica, 24.0);
  EXPECT_EQ(c.tidegate.policy.targets.kv_usage, 0.8);
  // The policy's replica model, SLO and cold start follow the profile unless it sets them.
  EXPECT_DOUBLE_EQ(c.tidegate.policy.cold_start_s, 120);
  EXPECT_DOUBLE_EQ(c.tidegate.policy.slo.ttft_s, 5);
  EXPECT_DOUBLE_EQ(c.tidegate.policy.capacity.step_s, 8192.0 / 10000 + 0.010);
  EXPECT_EQ(c.tidegate.policy.capacity.max_in_flight, 32);
  const auto own = load_config_text("policy:\n  slo: {ttft: 3s}\n  capacity: {prefill_tokens_per_s: 5000}\n",
                                    default_config());
  EXPECT_DOUBLE_EQ(own.tidegate.policy.slo.ttft_s, 3);
  EXPECT_DOUBLE_EQ(own.tidegate.policy.capacity.prefill_tokens_per_s, 5000);
  try {
    load_config_text("policy:\n  tiers:\n    - {name: asleep, price_fraction: 11, promotion: 3s}\n", default_config());
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.line(), 3) << e.what();
  }
  EXPECT_THROW(load_config_text("policy:\n  capacity: 5\n", default_config()), ConfigError);
}

TEST(Cli, RejectsAbsurdParametersWithAMessage) {
  auto parse = [](std::vector<const char*> args) {
    args.insert(args.begin(), "tidegate-replay");
    return parse_cli(static_cast<int>(args.size()), args.data());
  };
  EXPECT_THROW(parse({}), CliError);
  EXPECT_THROW(parse({"--trace", "x", "--replicas-min", "0"}), CliError);
  EXPECT_THROW(parse({"--trace", "x", "--replicas-min", "5", "--replicas-max", "2"}), CliError);
  EXPECT_THROW(parse({"--trace", "x", "--load-factor", "-1"}), CliError);
  EXPECT_THROW(parse({"--trace", "x", "--slo-ttft-ms", "abc"}), CliError);
  EXPECT_THROW(parse({"--trace", "x", "--bogus"}), CliError);
  EXPECT_THROW(parse({"--trace", "x", "--on-bad-row", "ignore"}), CliError);
  try {
    parse({"--trace", "x", "--replicas-max", "1000000"});
    FAIL();
  } catch (const CliError& e) {
    EXPECT_NE(std::string(e.what()).find("--replicas-max"), std::string::npos);
  }
  EXPECT_THROW(parse({"--trace", "x", "--variant", "bursty"}), CliError);
  EXPECT_THROW(parse({"--trace", "x", "--variant", "onoff:on_min=90,on_max=30"}), CliError);
  EXPECT_THROW(parse({"--trace", "x", "--cold-start-s", "-5"}), CliError);
  EXPECT_THROW(parse({"--trace", "x", "--tune-share", "1.5"}), CliError);
  const auto a = parse({"--trace", "t.csv", "--slo-ttft-ms=1500", "--json", "--replicas-max", "7", "--cold-start-s",
                        "90", "--variant", "onoff:seed=3", "--tune-headroom", "0.9,1.1"});
  EXPECT_DOUBLE_EQ(a.config.options.slo.ttft_s, 1.5);
  EXPECT_EQ(a.config.tidegate.policy.max_replicas, 7);
  EXPECT_TRUE(a.json);
  // Flags reach the policy's view too: its SLO and cold start follow the replay's.
  EXPECT_DOUBLE_EQ(a.config.tidegate.policy.slo.ttft_s, 1.5);
  EXPECT_DOUBLE_EQ(a.config.tidegate.policy.cold_start_s, 90);
  EXPECT_EQ(a.variant, "onoff:seed=3");
  EXPECT_EQ(a.grid.headroom, (std::vector<double>{0.9, 1.1}));
}

TEST(Cli, TraceWindowAndModel) {
  auto parse = [](std::vector<const char*> args) {
    args.insert(args.begin(), "tidegate-replay");
    return parse_cli(static_cast<int>(args.size()), args.data());
  };
  const auto a = parse({"--trace", "b.csv", "--window-s", "3600:7200", "--trace-model", "GPT-4", "--format", "burstgpt"});
  EXPECT_DOUBLE_EQ(a.window_from_s, 3600);
  EXPECT_DOUBLE_EQ(a.window_to_s, 7200);
  EXPECT_EQ(a.trace_model, "GPT-4");
  EXPECT_EQ(a.format, TraceFormat::kBurstGpt);
  const auto open_end = parse({"--trace", "b.csv", "--window-s", "60:"});
  EXPECT_DOUBLE_EQ(open_end.window_from_s, 60);
  EXPECT_TRUE(std::isinf(open_end.window_to_s));
  for (const char* bad : {"3600", "7200:3600", "5:5", "-1:10", "a:b"}) {
    try {
      parse({"--trace", "x", "--window-s", bad});
      ADD_FAILURE() << bad;
    } catch (const CliError& e) {
      EXPECT_NE(std::string(e.what()).find("--window-s"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse({"--trace", "x", "--trace-model", ""}), CliError);
  EXPECT_EQ(parse({"--trace", "x", "--repeat", "6"}).repeat, 6);
  EXPECT_THROW(parse({"--trace", "x", "--repeat", "0"}), CliError);
  EXPECT_THROW(parse({"--trace", "x", "--repeat", "2.5"}), CliError);
}

}  // namespace
}  // namespace tidegate::replay
