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

}  // namespace
}  // namespace tidegate::app
