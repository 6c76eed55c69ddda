#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "tidegate/common/config_error.h"
#include "tidegate/ratelimit/config.h"

namespace tidegate::ratelimit {
namespace {

std::shared_ptr<const RateLimitConfig> parse(const std::string& text) {
  return parse_rate_limits(YAML::Load(text)["rate_limits"], "rate_limits");
}

TEST(RateLimitConfig, ParsesEveryScopeKind) {
  const auto c = parse(
      "rate_limits:\n"
      "  - {scope: 'key:*', requests_per_minute: 600}\n"
      "  - {scope: 'tenant:acme', tokens_per_minute: 20000}\n"
      "  - {scope: 'model:llama', requests_per_minute: 1000, tokens_per_minute: 500000}\n");
  ASSERT_EQ(c->rules.size(), 3u);
  EXPECT_EQ(c->rules[0].kind, ScopeKind::kKey);
  EXPECT_EQ(c->rules[0].match, "*");
  EXPECT_DOUBLE_EQ(c->rules[0].requests_per_minute, 600);
  EXPECT_DOUBLE_EQ(c->rules[0].tokens_per_minute, 0);
  EXPECT_EQ(c->rules[1].kind, ScopeKind::kTenant);
  EXPECT_DOUBLE_EQ(c->rules[1].tokens_per_minute, 20000);
  EXPECT_EQ(c->rules[2].kind, ScopeKind::kModel);
  EXPECT_EQ(c->rules[2].match, "llama");
}

struct BadCase {
  std::string yaml, key;
  int line;
  std::string says;
};

TEST(RateLimitConfig, BadEntriesNameTheKeyAndLine) {
  const std::vector<BadCase> cases{
      {"- {scope: 'team:x', requests_per_minute: 1}", "rate_limits[0].scope", 1, "unknown scope kind 'team'"},
      {"- {scope: 'acme', requests_per_minute: 1}", "rate_limits[0].scope", 1, "no kind"},
      {"- {scope: 'tenant:', requests_per_minute: 1}", "rate_limits[0].scope", 1, "names nothing"},
      {"- {scope: 'tenant:a', requests_per_minute: 1}\n- {scope: 'tenant:b'}", "rate_limits[1]", 2,
       "requests_per_minute or tokens_per_minute"},
      {"- {scope: 'tenant:a', requests_per_minute: -5}", "rate_limits[0].requests_per_minute", 1, ""},
      {"- {scope: 'tenant:a', rpm: 5}", "rate_limits[0].rpm", 1, ""},
      {"- {scope: 'key:*', requests_per_minute: 1}\n- {scope: 'key:*', tokens_per_minute: 1}", "rate_limits[1].scope",
       2, "one entry"},
      {"{scope: 'key:*'}", "rate_limits", 1, "a list"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.yaml);
    try {
      parse_rate_limits(YAML::Load(c.yaml), "rate_limits");
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), c.key) << e.what();
      EXPECT_EQ(e.line(), c.line) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tidegate::ratelimit
