// What a SIGHUP applies and what it names as needing a restart.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include "reload_scope.h"

namespace tidegate::app {
namespace {

std::shared_ptr<const gateway::GatewayConfig> parse(const std::string& extra, const std::string& listen = "127.0.0.1:18000",
                                                    int threads = 2) {
  return gateway::parse_gateway_config(YAML::Load("listen: \"" + listen + "\"\nthreads: " + std::to_string(threads) +
                                                  "\nmodels:\n  - name: m\n    replicas:\n"
                                                  "      - {id: a, url: \"http://127.0.0.1:1\"}\n" +
                                                  extra));
}

const char* kCache = "cache: {threshold: 0.9, embedder: {type: hash, dim: 64}}\n";
const char* kCost = "cost: {replica_classes: {gpu: {usd_per_hour: 2}}}\n";

TEST(ReloadScope, TheGatewaysOwnKeysAreApplied) {
  const auto running = parse(kCache);
  // A new replica and a new model: the gateway applies both in place.
  const auto next = gateway::parse_gateway_config(YAML::Load(
      std::string("listen: \"127.0.0.1:18000\"\nthreads: 2\nmodels:\n  - name: m\n    replicas:\n"
                  "      - {id: a, url: \"http://127.0.0.1:1\"}\n      - {id: b, url: \"http://127.0.0.1:2\"}\n"
                  "  - name: n\n    replicas:\n      - {id: c, url: \"http://127.0.0.1:3\"}\n") +
      kCache));
  EXPECT_TRUE(needs_restart(*running, *next).empty());
}

TEST(ReloadScope, SectionsBuiltAtStartAreNamed) {
  const auto running = parse(std::string(kCache) + kCost);
  EXPECT_EQ(needs_restart(*running, *parse(std::string("cache: {threshold: 0.95, embedder: {type: hash, dim: 64}}\n") + kCost)),
            std::vector<std::string>{"cache"});
  EXPECT_EQ(needs_restart(*running, *parse(kCache)), std::vector<std::string>{"cost"});  // removed
  EXPECT_EQ(needs_restart(*running, *parse(std::string(kCache) + kCost + "scaler: {tick: 1s}\n")),
            std::vector<std::string>{"scaler"});  // added
  // Moving a section in the file changes its lines, not its content.
  EXPECT_TRUE(needs_restart(*running, *parse(std::string("\n\n") + kCost + kCache)).empty());
}

TEST(ReloadScope, ListenerAndThreadsAreNamed) {
  const auto running = parse("");
  EXPECT_EQ(needs_restart(*running, *parse("", "127.0.0.1:18001")), std::vector<std::string>{"listen"});
  EXPECT_EQ(needs_restart(*running, *parse("", "127.0.0.1:18000", 4)), std::vector<std::string>{"threads"});
}

}  // namespace
}  // namespace tidegate::app
