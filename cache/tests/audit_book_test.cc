// The audit book (cache/src/audit_book.h): per-scope cuts, their bound, the file; and the
// `audit:` config keys.
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>

#include "../src/audit_book.h"
#include "tidegate/cache/cache_config.h"
#include "tidegate/cache/semantic_cache.h"
#include "tidegate/common/config_error.h"

using namespace tidegate::cache;
namespace fs = std::filesystem;

TEST(AuditBook, FalseHitTightensOnlyItsScopeAndOnlyAtOrBelowItsScore) {
  AuditBook book(100);
  EXPECT_FALSE(book.refuses("s1", "cosine", 0.5));
  book.record("m", "s1", "cosine", 0.95, true);  // right: changes nothing
  EXPECT_FALSE(book.refuses("s1", "cosine", 0.9));
  const auto c = book.record("m", "s1", "cosine", 0.93, false);
  EXPECT_EQ(c.judged, 2u);
  EXPECT_EQ(c.false_hits, 1u);
  EXPECT_TRUE(book.refuses("s1", "cosine", 0.93));   // at the score judged wrong
  EXPECT_TRUE(book.refuses("s1", "cosine", 0.91));   // below it
  EXPECT_FALSE(book.refuses("s1", "cosine", 0.94));  // above it
  EXPECT_FALSE(book.refuses("s2", "cosine", 0.91));  // another scope
  EXPECT_FALSE(book.refuses("s1", "verifier", 0.5)); // evidence in other units is not used
  // Never loosened: a right hit above the cut, or a lower false hit, leaves it where it is.
  book.record("m", "s1", "cosine", 0.99, true);
  book.record("m", "s1", "cosine", 0.90, false);
  EXPECT_TRUE(book.refuses("s1", "cosine", 0.93));
  EXPECT_EQ(book.tightened_scopes(), 1u);
}

TEST(AuditBook, KeepsAtMostMaxScopesForgettingTheLeastRecentlyJudged) {
  AuditBook book(2);
  book.record("m", "a", "cosine", 0.9, false);
  book.record("m", "b", "cosine", 0.9, false);
  book.record("m", "a", "cosine", 0.95, true);  // a is recent again
  book.record("m", "c", "cosine", 0.9, false);  // b goes
  EXPECT_TRUE(book.refuses("a", "cosine", 0.9));
  EXPECT_FALSE(book.refuses("b", "cosine", 0.9));
  EXPECT_TRUE(book.refuses("c", "cosine", 0.9));
  EXPECT_EQ(book.models().at("m").judged, 4u);  // the pool's counts keep everything
}

TEST(AuditBook, SavesAndLoadsAndReportsACorruptFile) {
  const auto dir = fs::temp_directory_path() / ("tidegate-audit-book-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto path = (dir / "audit.json").string();
  {
    AuditBook book(10);
    book.record("m", "s", "verifier", 0.7, false);
    book.record("m", "t", "verifier", 0.8, true);
    EXPECT_TRUE(book.dirty());
    std::string error;
    ASSERT_TRUE(save_audit_book(book, path, &error)) << error;
    EXPECT_FALSE(book.dirty());
  }
  AuditBook loaded(10);
  EXPECT_FALSE(load_audit_book(loaded, path).has_value());
  EXPECT_TRUE(loaded.refuses("s", "verifier", 0.7));
  EXPECT_FALSE(loaded.refuses("t", "verifier", 0.7));
  EXPECT_EQ(loaded.models().at("m").judged, 2u);
  EXPECT_EQ(loaded.models().at("m").false_hits, 1u);

  std::ofstream(path, std::ios::trunc) << "{\"version\":1,\"models\":{\"m\":{\"judged\":\"x\"}}";
  AuditBook fresh(10);
  const auto problem = load_audit_book(fresh, path);
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("audit.json"), std::string::npos) << *problem;
  EXPECT_TRUE(fs::exists(path + ".corrupt"));
  EXPECT_TRUE(fresh.models().empty());
  EXPECT_FALSE(load_audit_book(fresh, (dir / "absent.json").string()).has_value());  // no file: no problem
  fs::remove_all(dir);
}

namespace {

std::string config_error(const std::string& yaml) {
  try {
    parse_cache_config(YAML::Load(yaml)["cache"], "cache");
  } catch (const tidegate::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(AuditConfig, DefaultsAndKeys) {
  const auto c = parse_cache_config(YAML::Load("cache: {enabled: false}")["cache"], "cache");
  EXPECT_DOUBLE_EQ(c->audit.fraction, 0.01);
  EXPECT_EQ(c->audit.max_in_flight, 4u);
  EXPECT_DOUBLE_EQ(c->audit.timeout_s, 30);
  EXPECT_DOUBLE_EQ(c->audit.judge_threshold, 0.6);
  const auto d = parse_cache_config(
      YAML::Load("cache:\n  enabled: false\n  audit: {fraction: 1.0, max_in_flight: 2, timeout: 250ms, "
                 "judge_threshold: 0.7, max_scopes: 5}\n")["cache"],
      "cache");
  EXPECT_DOUBLE_EQ(d->audit.fraction, 1.0);
  EXPECT_EQ(d->audit.max_in_flight, 2u);
  EXPECT_DOUBLE_EQ(d->audit.timeout_s, 0.25);
  EXPECT_DOUBLE_EQ(d->audit.judge_threshold, 0.7);
  EXPECT_EQ(d->audit.max_scopes, 5u);
}

TEST(AuditConfig, ErrorsNameTheKeyAndLine) {
  auto e = config_error("cache:\n  enabled: false\n  audit:\n    fraction: 1.5\n");
  EXPECT_NE(e.find("cache.audit.fraction"), std::string::npos) << e;
  EXPECT_NE(e.find("line 4"), std::string::npos) << e;
  e = config_error("cache:\n  enabled: false\n  audit:\n    max_in_flight: 0\n");
  EXPECT_NE(e.find("cache.audit.max_in_flight"), std::string::npos) << e;
  e = config_error("cache:\n  enabled: false\n  audit:\n    timeout: 0s\n");
  EXPECT_NE(e.find("cache.audit.timeout"), std::string::npos) << e;
  e = config_error("cache:\n  enabled: false\n  audit:\n    judge: 0.5\n");
  EXPECT_NE(e.find("cache.audit.judge"), std::string::npos) << e;
  e = config_error("cache:\n  enabled: false\n  audit: 0.01\n");
  EXPECT_NE(e.find("cache.audit"), std::string::npos) << e;
}
