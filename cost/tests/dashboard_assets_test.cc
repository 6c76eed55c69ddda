#include <gtest/gtest.h>

#include "tidegate/cost/dashboard_assets.h"

namespace tidegate::cost {
namespace {

TEST(DashboardAssets, EmbeddedWithContentTypes) {
  const auto index = dashboard_asset("");
  ASSERT_TRUE(index.found());
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  EXPECT_NE(index.content.find("app.js"), std::string_view::npos);
  EXPECT_EQ(dashboard_asset("/index.html").content, index.content);
  EXPECT_EQ(dashboard_asset("app.js").content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(dashboard_asset("app.js").content.find("data.json"), std::string_view::npos);
  EXPECT_EQ(dashboard_asset("style.css").content_type, "text/css; charset=utf-8");
  EXPECT_FALSE(dashboard_asset("../secret").found());
  EXPECT_FALSE(dashboard_asset("data.json").found());  // served live, not embedded
  // Self-contained: nothing is fetched from another origin.
  for (const auto* f : {"index.html", "app.js", "style.css"}) {
    const auto c = dashboard_asset(f).content;
    EXPECT_EQ(c.find("http://"), std::string_view::npos) << f;
    EXPECT_EQ(c.find("https://"), std::string_view::npos) << f;
  }
}

}  // namespace
}  // namespace tidegate::cost
