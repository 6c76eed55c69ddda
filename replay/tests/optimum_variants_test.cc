// The offline optimum, trace variants, prefix block ids and what the replay does with them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "synthetic.h"
#include "tidegate/replay/baselines.h"
#include "tidegate/replay/config.h"
#include "tidegate/replay/optimum.h"
#include "tidegate/replay/suite.h"
#include "tidegate/replay/variants.h"

namespace tidegate::replay {
namespace {

// Per-minute request counts: their coefficient of variation measures burstiness.
double minute_cv(const Trace& t) {
  std::map<int, double> per;
  for (const auto& r : t.requests) per[static_cast<int>(r.arrival_s / 60)] += 1;
  const int minutes = static_cast<int>(t.duration_s() / 60) + 1;
  double sum = 0, sq = 0;
  for (int m = 0; m < minutes; ++m) sum += per[m], sq += per[m] * per[m];
  const double mean = sum / minutes;
  return std::sqrt(std::max(0.0, sq / minutes - mean * mean)) / mean;
}

TEST(Variants, OnOffSqueezesEachCycleIntoItsBurst) {
  const auto base = testing::synthetic_trace(6000, 3, 800, 50);
  const auto v = make_variant(base, parse_variant("onoff:on_min=60,on_max=120,gap_min=480,gap_max=720,background=0"));
  ASSERT_EQ(v.requests.size(), base.requests.size());
  EXPECT_TRUE(std::is_sorted(v.requests.begin(), v.requests.end(),
                             [](const auto& a, const auto& b) { return a.arrival_s < b.arrival_s; }));
  EXPECT_EQ(v.requests.front().arrival_s, 0);
  // Quiet gaps of at least gap_min - (a little): no background share.
  double longest_gap = 0;
  int gaps = 0;
  for (std::size_t i = 1; i < v.requests.size(); ++i) {
    const double g = v.requests[i].arrival_s - v.requests[i - 1].arrival_s;
    longest_gap = std::max(longest_gap, g);
    gaps += g > 400;
  }
  EXPECT_GE(longest_gap, 480 - 1);
  EXPECT_GE(gaps, static_cast<int>(base.duration_s() / 840) - 1);
  EXPECT_GT(minute_cv(v), 3 * minute_cv(base));
  // The mean rate holds within a cycle's length.
  EXPECT_NEAR(v.duration_s(), base.duration_s(), 840);
  // Same seed, same trace; another seed, another one.
  const auto again = make_variant(base, parse_variant("onoff:background=0"));
  const auto other = make_variant(base, parse_variant("onoff:background=0,seed=2"));
  EXPECT_EQ(again.requests.back().arrival_s, v.requests.back().arrival_s);
  EXPECT_NE(other.requests.back().arrival_s, v.requests.back().arrival_s);
}

TEST(Variants, SpikesAddCopiesMmppAndWaveKeepTheCount) {
  const auto base = testing::synthetic_trace(6000, 3, 800, 50);
  const auto spikes = make_variant(base, parse_variant("spikes:every=300,spike_s=60,mult=4"));
  EXPECT_GT(spikes.requests.size(), base.requests.size());
  EXPECT_GT(minute_cv(spikes), 2 * minute_cv(base));
  const auto mmpp = make_variant(base, parse_variant("mmpp:high=60,low=240,ratio=8"));
  EXPECT_EQ(mmpp.requests.size(), base.requests.size());
  EXPECT_GT(minute_cv(mmpp), 2 * minute_cv(base));
  EXPECT_NEAR(mmpp.duration_s(), base.duration_s(), base.duration_s() * 0.3);
  const auto wave = make_variant(base, parse_variant("wave:period=600,amplitude=0.8"));
  EXPECT_EQ(wave.requests.size(), base.requests.size());
  EXPECT_GT(minute_cv(wave), minute_cv(base));
  // Token lengths travel with their requests.
  std::int64_t a = 0, b = 0;
  for (const auto& r : base.requests) a += r.prompt_tokens;
  for (const auto& r : mmpp.requests) b += r.prompt_tokens;
  EXPECT_EQ(a, b);
}

TEST(Variants, SplitRebasesAndBadSpecsAreNamed) {
  const auto base = testing::synthetic_trace(600, 2, 800, 50);
  const auto part = make_variant(base, parse_variant("split:from=100,to=200"));
  EXPECT_EQ(part.requests.front().arrival_s, 0);
  EXPECT_LT(part.duration_s(), 100);
  EXPECT_GT(part.requests.size(), 100u);
  EXPECT_THROW(make_variant(base, parse_variant("split:from=1e9,to=2e9")), std::invalid_argument);
  for (const char* bad : {"onoff:on_min=0", "onoff:foo=1", "onoff:on_min=x", "wave:amplitude=1.5", "spikes:mult=0.5",
                          "mmpp:ratio=-1", "stairs"}) {
    EXPECT_THROW(parse_variant(bad), std::invalid_argument) << bad;
  }
  EXPECT_EQ(describe(parse_variant("mmpp:ratio=4,seed=9")), "mmpp:high=120,low=480,ratio=4,seed=9");
}

TEST(TraceBlocks, MooncakeHashIdsAreChainedAndChecked) {
  const std::string text =
      "{\"timestamp\": 0, \"input_length\": 1500, \"output_length\": 5, \"hash_ids\": [1, 2, 3]}\n"
      "{\"timestamp\": 10, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [1, 2, 9]}\n"
      "{\"timestamp\": 20, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [7, 2]}\n"
      "{\"timestamp\": 30, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1]}\n"
      "{\"timestamp\": 40, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [\"a\"]}\n"
      "{\"timestamp\": 50, \"input_length\": 600, \"output_length\": 5}\n";
  const auto t = parse_trace_text(text, "m.jsonl", {});
  ASSERT_EQ(t.requests.size(), 5u);
  EXPECT_EQ(t.bad_row_count, 1u);  // the string id
  EXPECT_EQ(t.block_tokens, 512);
  EXPECT_EQ(t.requests_with_blocks, 4u);
  const auto& r = t.requests;
  EXPECT_EQ(r[0].blocks[0], r[1].blocks[0]);  // the same first two blocks: the same prefix
  EXPECT_EQ(r[0].blocks[1], r[1].blocks[1]);
  EXPECT_NE(r[0].blocks[2], r[1].blocks[2]);
  EXPECT_NE(r[2].blocks[1], r[0].blocks[1]);  // id 2 after another prefix is not that block
  EXPECT_EQ(t.non_chain_block_ids, 1u);
  EXPECT_EQ(t.first_non_chain_line, 3u);
  EXPECT_EQ(t.block_count_mismatch_rows, 1u);  // line 4: 600 tokens need 2 blocks, it has 1
  EXPECT_TRUE(r[4].blocks.empty());
  const auto azure = parse_trace_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,2\n", "a", {});
  EXPECT_EQ(azure.block_tokens, 0);  // no ids: prefix caching off
}

// Every request shares a 4096-token system prompt and adds 512 of its own.
Trace shared_prefix_trace(bool with_blocks) {
  Trace t;
  t.format = TraceFormat::kMooncake;
  t.block_tokens = with_blocks ? 512 : 0;
  for (int i = 0; i < 400; ++i) {
    TraceRequest r;
    r.arrival_s = i * 0.5;
    r.prompt_tokens = 4608;
    r.output_tokens = 20;
    if (with_blocks) {
      for (std::uint64_t b = 0; b < 8; ++b) r.blocks.push_back(1000 + b);
      r.blocks.push_back(5000 + static_cast<std::uint64_t>(i));
      t.requests_with_blocks++;
    }
    t.requests.push_back(r);
  }
  return t;
}

TEST(ReplayPrefixCache, SharedPrefixesAreNotPrefilledAgain) {
  ReplayOptions o = default_config().options;
  o.initial_active = 2;
  o.replicas_min = o.replicas_max = 2;
  StaticPolicy fixed(2);
  const auto cached = run_replay(shared_prefix_trace(true), fixed, o).summary;
  StaticPolicy fixed2(2);
  const auto plain = run_replay(shared_prefix_trace(false), fixed2, o).summary;
  EXPECT_GT(cached.prefix_query_tokens, 0);
  // After each replica's first request, 4096 of 4608 tokens hit.
  EXPECT_GT(static_cast<double>(cached.prefix_hit_tokens) / cached.prefix_query_tokens, 0.85);
  EXPECT_EQ(plain.prefix_hit_tokens, 0);
  EXPECT_LT(cached.ttft_p50_s, plain.ttft_p50_s / 3);
}

// Smooth traffic with one strong burst in the middle.
Trace burst_trace() {
  auto t = testing::synthetic_trace(6000, 2, 900, 40, 11);
  auto burst = testing::synthetic_trace(3000, 25, 900, 40, 12);
  for (auto& r : burst.requests) r.arrival_s += 1200;
  for (const auto& r : burst.requests)
    if (r.arrival_s < 1320) t.requests.push_back(r);
  std::sort(t.requests.begin(), t.requests.end(), [](const auto& a, const auto& b) { return a.arrival_s < b.arrival_s; });
  while (t.requests.back().arrival_s > 2400) t.requests.pop_back();
  return t;
}

TEST(Optimum, MeetsTheSloBelowStaticAndFollowsTheBurstAhead) {
  const auto trace = burst_trace();
  ReplayOptions o = default_config().options;
  o.replicas_max = 32;
  o.profile.cold_start_s = 60;
  const auto fixed = cheapest_static(trace, o);
  ASSERT_TRUE(fixed.found);
  o.initial_active = fixed.replicas;
  const auto opt = offline_optimum(trace, o);
  ASSERT_TRUE(opt.found);
  EXPECT_TRUE(opt.summary.meets_slo(o.slo));
  EXPECT_LT(opt.summary.gpu_hours, fixed.summary.gpu_hours);
  // The schedule is high during the burst and low away from it.
  ASSERT_GT(trace.duration_s(), 2300);
  const auto at = [&](double t) { return opt.schedule.at(static_cast<std::size_t>(t / opt.segment_s)); };
  EXPECT_GT(at(1250), at(600));
  EXPECT_GT(at(1250), at(2000));
  // Replayed with the lead of a cold start: the burst's replicas are ready when it starts.
  ScheduledPolicy plan(opt.schedule, opt.segment_s, o.profile.cold_start_s + 2);
  ClusterObservation obs;
  obs.t = 1200 - o.profile.cold_start_s;
  EXPECT_EQ(plan.decide(obs).active, at(1200));
  // A Tidegate run of the same trace costs at least the optimum (it does not know the future).
  TidegatePolicyConfig tc;
  tc.policy.max_replicas = 32;
  tc.policy.capacity = capacity_from_profile(o.profile);
  TidegatePolicy tidegate(tc, "tidegate");
  const auto online = run_replay(trace, tidegate, o).summary;
  if (online.meets_slo(o.slo)) {
    EXPECT_GE(online.gpu_hours, opt.summary.gpu_hours * 0.99);
  }
}

TEST(Optimum, NeverDearerThanTheStaticFleetThatMeetsTheSlo) {
  // A steady trace with a short spike of 0.5% of the requests: a static fleet sized for the
  // steady part meets the 99% SLO by missing in the spike; a per-segment search on its own
  // buys the spike's segment its way out.
  auto t = testing::synthetic_trace(3600, 2, 900, 40, 21);
  auto spike = testing::synthetic_trace(18, 60, 900, 40, 22);
  for (auto& r : spike.requests) r.arrival_s += 900;
  t.requests.insert(t.requests.end(), spike.requests.begin(), spike.requests.end());
  std::sort(t.requests.begin(), t.requests.end(), [](const auto& a, const auto& b) { return a.arrival_s < b.arrival_s; });
  ReplayOptions o = default_config().options;
  o.replicas_max = 32;
  o.profile.cold_start_s = 60;
  const auto fixed = cheapest_static(t, o);
  ASSERT_TRUE(fixed.found);
  o.initial_active = fixed.replicas;
  OptimumOptions search;
  search.static_fleet = fixed.replicas;
  const auto opt = offline_optimum(t, o, search);
  ASSERT_TRUE(opt.found);
  EXPECT_TRUE(opt.summary.meets_slo(o.slo));
  EXPECT_LE(opt.summary.gpu_hours, fixed.summary.gpu_hours * (1 + 1e-9));
  for (int n : opt.schedule) EXPECT_LE(n, fixed.replicas);
}

TEST(Optimum, SaysSoWhenNothingMeetsTheSlo) {
  auto trace = testing::synthetic_trace(300, 40, 4000, 40);
  ReplayOptions o = default_config().options;
  o.replicas_max = 2;  // far too few for 160k prompt tokens a second
  o.initial_active = 2;
  OptimumOptions search;
  search.max_rounds = 2;
  const auto opt = offline_optimum(trace, o, search);
  EXPECT_FALSE(opt.found);
  EXPECT_FALSE(opt.summary.meets_slo(o.slo));
  for (int n : opt.schedule) EXPECT_LE(n, 2);
}

TEST(Variants, RepeatPlaysTheTraceEndToEnd) {
  Trace t;
  t.format = TraceFormat::kMooncake;
  for (int i = 0; i < 4; ++i) {
    TraceRequest r;
    r.arrival_s = 10.0 * i;  // 0, 10, 20, 30: a mean gap of 10 s
    r.prompt_tokens = 100 + i;
    r.output_tokens = 5;
    if (i == 1) r.blocks = {7, 8};
    t.requests.push_back(r);
  }
  t.requests_with_blocks = 1;
  const Trace r = repeat_trace(t, 3);
  ASSERT_EQ(r.requests.size(), 12u);
  EXPECT_DOUBLE_EQ(r.requests[4].arrival_s, 40);  // one mean gap after the copy before
  EXPECT_DOUBLE_EQ(r.requests[11].arrival_s, 110);
  EXPECT_EQ(r.requests[9].prompt_tokens, 101);
  EXPECT_EQ(r.requests[9].blocks, (std::vector<std::uint64_t>{7, 8}));
  EXPECT_EQ(r.requests_with_blocks, 3u);
  for (std::size_t i = 1; i < r.requests.size(); ++i) EXPECT_GT(r.requests[i].arrival_s, r.requests[i - 1].arrival_s);
  EXPECT_EQ(repeat_trace(t, 1).requests.size(), 4u);
  EXPECT_THROW(repeat_trace(t, 0), std::invalid_argument);
  EXPECT_THROW(repeat_trace(t, 1001), std::invalid_argument);
}

}  // namespace
}  // namespace tidegate::replay
