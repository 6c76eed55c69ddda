#include <gtest/gtest.h>

#include "tidegate/common/config_error.h"

namespace tidegate {
namespace {

TEST(ConfigError, NamesKeyAndLine) {
  const auto doc = YAML::Load("listen: 127.0.0.1\nport: eighty\n");
  try {
    yaml_int(doc, "port", "");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "port");
    EXPECT_EQ(e.line(), 2);
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos);
  }
}

TEST(ConfigError, EnumChoices) {
  enum class Color { kRed, kGreen, kBlue };
  const auto doc = YAML::Load("paint:\n  color: green\n  shade: mauve\n");
  const auto pick = [&](const char* key) {
    return yaml_enum<Color>(doc["paint"], key, "paint", {{"red", Color::kRed}, {"green", Color::kGreen}, {"blue", Color::kBlue}});
  };
  EXPECT_EQ(pick("color"), Color::kGreen);
  EXPECT_EQ(pick("missing"), Color::kRed);  // the first choice is the default
  try {
    pick("shade");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "paint.shade");
    EXPECT_EQ(e.line(), 3);
    EXPECT_NE(std::string(e.what()).find("expected red, green or blue (got 'mauve')"), std::string::npos) << e.what();
  }
}

TEST(ConfigError, RangeChecked) {
  const auto doc = YAML::Load("a:\n  b: -3\n");
  EXPECT_THROW(yaml_double(doc["a"], "b", "a", std::nullopt, 0.0), ConfigError);
  EXPECT_EQ(yaml_double(doc["a"], "c", "a", 1.5), 1.5);
}

TEST(ConfigError, DurationsAndSizes) {
  EXPECT_DOUBLE_EQ(parse_duration_seconds("250ms"), 0.25);
  EXPECT_DOUBLE_EQ(parse_duration_seconds("2m"), 120);
  EXPECT_DOUBLE_EQ(parse_duration_seconds("5"), 5);
  EXPECT_THROW(parse_duration_seconds("5 parsecs"), std::invalid_argument);
  EXPECT_EQ(parse_byte_size("8MiB"), 8u << 20);
  EXPECT_THROW(parse_byte_size("-1"), std::invalid_argument);
}

TEST(ConfigError, RejectsUnknownKeys) {
  const auto doc = YAML::Load("listen: x\nlisten_prot: 3\n");
  try {
    yaml_reject_unknown(doc, "", {"listen", "port"});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "listen_prot");
    EXPECT_EQ(e.line(), 2);
  }
}

}  // namespace
}  // namespace tidegate
