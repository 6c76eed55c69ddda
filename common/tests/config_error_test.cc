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

TEST(ConfigError, NumbersArePlainDecimalsWithinRange) {
  // 1e300s overflowed the chrono conversion downstream; hex slipped through stod.
  EXPECT_THROW(parse_duration_seconds("1e300s"), std::invalid_argument);
  EXPECT_THROW(parse_duration_seconds("367d"), std::invalid_argument);
  EXPECT_DOUBLE_EQ(parse_duration_seconds("366d"), 366.0 * 86400);
  EXPECT_THROW(parse_duration_seconds("0x10s"), std::invalid_argument);
  EXPECT_THROW(parse_duration_seconds("nan"), std::invalid_argument);
  EXPECT_THROW(parse_duration_seconds("inf"), std::invalid_argument);
  EXPECT_THROW(parse_duration_seconds(" 5s"), std::invalid_argument);
  EXPECT_DOUBLE_EQ(parse_duration_seconds("1.5e3ms"), 1.5);
  EXPECT_THROW(parse_byte_size("0x100000"), std::invalid_argument);
  EXPECT_THROW(parse_byte_size("1e300"), std::invalid_argument);
  EXPECT_THROW(parse_byte_size("+5"), std::invalid_argument);
  EXPECT_EQ(parse_byte_size("1.5KiB"), 1536u);
  EXPECT_EQ(parse_byte_size("2TiB"), std::uint64_t{2} << 40);
  const auto doc = YAML::Load("a:\n  size: 4GiB\n");
  try {
    yaml_bytes(doc["a"], "size", "a", std::nullopt, 1024, std::uint64_t{1} << 20);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "a.size");
    EXPECT_EQ(e.line(), 2);
    EXPECT_NE(std::string(e.what()).find("at most 1048576 bytes"), std::string::npos) << e.what();
  }
}

TEST(ConfigError, DuplicateKeysNameBothLines) {
  const auto doc = YAML::Load("admin_key: old\nmodels:\n  - name: m\n    port: 1\n    port: 2\nadmin_key: new\n");
  try {
    yaml_reject_duplicate_keys(doc);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "models[0].port");  // found depth-first, before the later admin_key
    EXPECT_EQ(e.line(), 5);
    EXPECT_NE(std::string(e.what()).find("first at line 4"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(yaml_reject_duplicate_keys(YAML::Load("a: {b: 1, c: 2}\nd: [{b: 1}, {b: 2}]\n")));
}

TEST(ConfigError, AliasBombsAndDeepNestingAreBounded) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) bomb += std::string(i ? ", *" : "*") + static_cast<char>(c - 1);
    bomb += "]\n";
  }
  EXPECT_THROW(yaml_reject_duplicate_keys(YAML::Load(bomb)), ConfigError);  // 10^10 nodes if walked
  std::string deep = "a: ";
  for (int i = 0; i < 70; ++i) deep += "{b: ";
  deep += "1" + std::string(70, '}') + "\n";
  EXPECT_THROW(yaml_reject_duplicate_keys(YAML::Load(deep)), ConfigError);
}

TEST(ConfigError, ASectionThatIsNotAMappingIsAnError) {
  // `lifecycle: 5` once meant "every default": the typed getters now refuse a scalar parent.
  const auto doc = YAML::Load("pool:\n  lifecycle: 5\n");
  try {
    yaml_int(doc["pool"]["lifecycle"], "warm_pool_size", "pool.lifecycle", 0);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "pool.lifecycle");
    EXPECT_EQ(e.line(), 2);
  }
  EXPECT_THROW(yaml_reject_unknown(doc["pool"]["lifecycle"], "pool.lifecycle", {"x"}), ConfigError);
  EXPECT_EQ(yaml_int(YAML::Load("pool:\n  lifecycle:\n")["pool"]["lifecycle"], "w", "p", 3), 3);  // empty is fine
}

}  // namespace
}  // namespace tidegate
