#include <gtest/gtest.h>

#include "dashboard_feed.h"

namespace tidegate::app {
namespace {

// One bucket (a step far longer than the test), one point in the series.
double last_point(boost::json::object& out, const char* series) {
  const auto& pts = out.at(series).at("lines").at("all").as_array();
  return pts.back().as_array().at(1).to_number<double>();
}

TEST(DashboardFeed, PercentilesCoverTheWholeBucketNotItsFirstRequests) {
  DashboardFeed feed(1e9, 1);
  // Latency climbs through the bucket, as under a building overload: a feed that kept only the
  // first few thousand samples would report the calm start.
  constexpr int kRequests = 40000;
  for (int i = 0; i < kRequests; ++i) {
    gateway::RequestContext ctx;
    ctx.timings.total_s = static_cast<double>(i) / kRequests;
    ctx.timings.ttfb_s = ctx.timings.total_s / 2;
    feed.on_complete(ctx);
  }
  boost::json::object out;
  feed.add_series(unix_now(), out);
  EXPECT_NEAR(last_point(out, "latency_p50_s"), 0.5, 0.04);
  EXPECT_NEAR(last_point(out, "latency_p99_s"), 0.99, 0.01);
  EXPECT_NEAR(last_point(out, "ttfb_s"), 0.25, 0.02);
}

TEST(DashboardFeed, EmptyBucketsAreNull) {
  DashboardFeed feed(1.0, 3);
  boost::json::object out;
  feed.add_series(unix_now(), out);
  for (const auto& p : out.at("latency_p99_s").at("lines").at("all").as_array())
    EXPECT_TRUE(p.as_array().at(1).is_null());
}

TEST(DashboardFeed, PrefixHitRatioPerReplica) {
  DashboardFeed feed(1.0, 3);
  boost::json::object out;
  feed.add_series(unix_now(), out);
  EXPECT_FALSE(out.contains("prefix_cache_hit_ratio"));  // no scaler, no engine counters: no panel
  feed.sample(unix_now(), {}, {}, {{"m 127.0.0.1:9001", 0.75}, {"m 127.0.0.1:9002", 0.25}});
  out = {};
  feed.add_series(unix_now(), out);
  const auto& s = out.at("prefix_cache_hit_ratio").as_object();
  EXPECT_EQ(s.at("unit").as_string(), "ratio");
  const auto& lines = s.at("lines").as_object();
  EXPECT_DOUBLE_EQ(lines.at("m 127.0.0.1:9001").as_array().back().as_array().at(1).as_double(), 0.75);
  EXPECT_DOUBLE_EQ(lines.at("m 127.0.0.1:9002").as_array().back().as_array().at(1).as_double(), 0.25);
}

TEST(DashboardFeed, CacheAuditRatesFromTheCacheStats) {
  // stats() of a cache with one audited verifier pool and one cosine pool not audited yet.
  const auto stats = boost::json::parse(R"({"audit":{"models":{
      "v":{"judged":40,"false_hits":2,"false_hit_rate":0.05,"false_hit_rate_upper":0.15,"max_false_hit_rate":0.1},
      "c":{"judged":0,"false_hits":0}}}})").as_object();
  const auto lines = cache_audit_lines(stats);
  EXPECT_EQ(lines, (std::map<std::string, double>{{"v audited", 0.05}, {"v upper bound", 0.15}, {"v max", 0.1}}));
  EXPECT_TRUE(cache_audit_lines(boost::json::object{}).empty());
  DashboardFeed feed(1.0, 3);
  boost::json::object out;
  feed.add_series(unix_now(), out);
  EXPECT_FALSE(out.contains("cache_audit_false_hit_rate"));  // no audits: no panel
  feed.sample(unix_now(), {}, {}, {}, lines);
  out = {};
  feed.add_series(unix_now(), out);
  const auto& s = out.at("cache_audit_false_hit_rate").as_object();
  EXPECT_EQ(s.at("unit").as_string(), "ratio");
  EXPECT_DOUBLE_EQ(s.at("lines").at("v upper bound").as_array().back().as_array().at(1).as_double(), 0.15);
}

}  // namespace
}  // namespace tidegate::app
