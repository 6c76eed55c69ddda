// Budgets: soft alerts (log, metric, webhook, once per period), hard refusals, period boundary
// crossed mid-request, persistence across restarts, and threads racing to the limit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "test_util.h"
#include "tidegate/testing/fake_http_server.h"

namespace tidegate::cost {
namespace {

using testing::metric_sum;

// 2026-11-30T23:59:30Z
constexpr double kNearMidnight = 1796083170.0;

// A real HTTP receiver on 127.0.0.1 that records POST bodies and answers 204.
class WebhookReceiver {
 public:
  int port() const { return server_.port(); }
  std::vector<std::string> bodies() const {
    std::vector<std::string> out;
    for (const auto& r : server_.requests()) out.push_back(r.body);
    return out;
  }

 private:
  tidegate::testing::FakeHttpServer server_{[](const tidegate::testing::FakeRequest&) {
    return tidegate::testing::FakeResponse{204, ""};
  }};
};

std::string budget_config(const std::string& extra) {
  return std::string(R"(
replica_classes:
  gpu: {usd_per_hour: 3600}
api_models:
  paid: {input_usd_per_1m: 1000000, output_usd_per_1m: 0}
tags: {labels: [team]}
)") + extra;
}

TEST(Budgets, SoftAlertFiresOnceAndHardLimitRefuses) {
  WebhookReceiver hook;
  prometheus::Registry registry;
  auto acc = make_cost_accounting(
      testing::config_from(budget_config("budgets:\n  - {scope: 'tenant:acme', period: day, soft_usd: 3, hard_usd: 5}\n"
                                         "alerts: {webhook_url: 'http://127.0.0.1:" + std::to_string(hook.port()) +
                                         "/alerts', webhook_timeout: 2s}\n")),
      registry);
  const RequestLabels acme{"paid", "acme", "k1", {}};
  const RequestLabels other{"paid", "globex", "k2", {}};
  int admitted = 0;
  for (int i = 0; i < 10; ++i) {  // each request costs $1 (one prompt token at $1M per 1M)
    const auto d = acc->check_budget(acme, kNearMidnight - 1000 + i);
    if (!d.allowed) {
      EXPECT_EQ(d.scope, "tenant:acme/day");
      EXPECT_NE(d.message.find("$5.00"), std::string::npos) << d.message;
      EXPECT_NE(d.message.find("2026-12-01T00:00:00Z"), std::string::npos) << d.message;
      const auto body = boost::json::parse(budget_error_body(d)).as_object();
      EXPECT_EQ(body.at("error").at("type").as_string(), "insufficient_quota");
      EXPECT_EQ(body.at("error").at("code").as_string(), "budget_exceeded");
      continue;
    }
    ++admitted;
    const auto h = acc->request_started(acme, "upstream", kNearMidnight - 1000 + i);
    acc->request_progress(h, 1, 0, kNearMidnight - 1000 + i);
    acc->request_finished(h, kNearMidnight - 1000 + i);
  }
  EXPECT_EQ(admitted, 5);
  EXPECT_TRUE(acc->check_budget(other, kNearMidnight).allowed);  // other tenants are not limited
  EXPECT_TRUE(acc->check_budget(acme, kNearMidnight + 60).allowed);  // a new day
  ASSERT_TRUE(acc->wait_alerts_idle(10));
  const auto bodies = hook.bodies();
  ASSERT_EQ(bodies.size(), 2u);  // soft once, hard once, though five more requests were refused
  const auto soft = boost::json::parse(bodies[0]).as_object();
  EXPECT_EQ(soft.at("event").as_string(), "budget_soft_limit");
  EXPECT_EQ(soft.at("scope").as_string(), "tenant:acme");
  EXPECT_EQ(soft.at("period_id").as_string(), "2026-11-30");
  EXPECT_EQ(metric_sum(registry, "tidegate_budget_alerts_total", "level", "soft"), 1);
  EXPECT_EQ(metric_sum(registry, "tidegate_budget_refusals_total"), 5);
  EXPECT_DOUBLE_EQ(metric_sum(registry, "tidegate_budget_spend_usd", "scope", "tenant:acme"), 5);
}

TEST(Budgets, RequestCrossingMidnightChargesTheDayItStarted) {
  prometheus::Registry registry;
  auto acc = make_cost_accounting(
      testing::config_from(budget_config("budgets:\n  - {scope: 'tag:team=*', period: day, hard_usd: 50}\n")), registry);
  const RequestLabels ml{"x", "acme", "k", {{"team", "ml"}}};
  acc->replica_state("r1", "x", "gpu", ReplicaState::kActive, kNearMidnight);
  const auto h = acc->request_started(ml, "r1", kNearMidnight);  // 23:59:30
  acc->request_progress(h, 10, 10, kNearMidnight + 60);           // 00:00:30 next day
  EXPECT_NEAR(acc->request_finished(h, kNearMidnight + 60), 60.0, 1e-9);
  EXPECT_FALSE(acc->check_budget(ml, kNearMidnight + 1).allowed);  // Nov 30 holds all $60
  EXPECT_TRUE(acc->check_budget(ml, kNearMidnight + 61).allowed);  // Dec 1 starts clean
  // Reports place each slice at the time it was incurred: 30 s before midnight, 30 s after.
  const auto before = boost::json::parse(acc->report("tag", kNearMidnight - 30, kNearMidnight + 30, "json").first);
  const auto after = boost::json::parse(acc->report("tag", kNearMidnight + 30, kNearMidnight + 90, "json").first);
  EXPECT_NEAR(before.at("rows").at(0).at("cost_usd").to_number<double>(), 30.0, 1e-9);
  EXPECT_EQ(before.at("rows").at(0).at("tag").as_string(), "team=ml");
  EXPECT_NEAR(after.at("rows").at(0).at("cost_usd").to_number<double>(), 30.0, 1e-9);
}

TEST(Budgets, SpendSurvivesRestart) {
  const auto dir = std::filesystem::temp_directory_path() / ("tidegate-cost-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto cfg = testing::config_from(budget_config("data_dir: " + dir.string() +
                                                      "\nbudgets:\n  - {scope: 'key:*', period: month, soft_usd: 1, "
                                                      "hard_usd: 3}\n"));
  const RequestLabels bot{"paid", "acme", "ci-bot", {}};
  {
    prometheus::Registry registry;
    auto acc = make_cost_accounting(cfg, registry);
    for (int i = 0; i < 2; ++i) {
      const auto h = acc->request_started(bot, "u", kNearMidnight);
      acc->request_progress(h, 1, 0, kNearMidnight);
      acc->request_finished(h, kNearMidnight);
    }
    acc->flush();
    EXPECT_EQ(metric_sum(registry, "tidegate_budget_alerts_total"), 1);
  }
  EXPECT_TRUE(std::filesystem::exists(dir / "budget_spend.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "budget_spend.json.tmp"));
  prometheus::Registry registry;
  auto acc = make_cost_accounting(cfg, registry);
  EXPECT_TRUE(acc->check_budget(bot, kNearMidnight + 5).allowed);
  const auto h = acc->request_started(bot, "u", kNearMidnight + 5);
  acc->request_progress(h, 1, 0, kNearMidnight + 5);
  acc->request_finished(h, kNearMidnight + 5);
  EXPECT_FALSE(acc->check_budget(bot, kNearMidnight + 6).allowed);  // $2 before restart + $1 after
  EXPECT_EQ(metric_sum(registry, "tidegate_budget_alerts_total", "level", "soft"), 0);  // fired before restart
  std::filesystem::remove_all(dir);
}

// `n` requests of one unit of work each on replica "u", started and finished at t.
void settle(CostAccounting& acc, const RequestLabels& who, int n, double t) {
  for (int i = 0; i < n; ++i) {
    const auto h = acc.request_started(who, "u", t);
    acc.request_progress(h, 1, 0, t);
    acc.request_finished(h, t);
  }
}

// What a kill -9 leaves: the journal, no final flush. A forked child charges and _exits.
TEST(Budgets, SpendSurvivesACrashWithoutAFlush) {
  const auto dir = std::filesystem::temp_directory_path() / ("tidegate-cost-crash-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto cfg = testing::config_from(
      budget_config("data_dir: " + dir.string() + "\nbudgets:\n  - {scope: 'key:*', period: month, hard_usd: 3}\n"));
  const RequestLabels bot{"paid", "acme", "ci-bot", {}};
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    prometheus::Registry registry;
    auto acc = make_cost_accounting(cfg, registry);
    settle(*acc, bot, 3, kNearMidnight);
    ::_exit(0);  // no destructor, no flush: only the journal's write(2)s are on disk
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(std::filesystem::exists(dir / "budget_spend.json"));  // never snapshotted
  prometheus::Registry registry;
  auto acc = make_cost_accounting(cfg, registry);
  EXPECT_FALSE(acc->check_budget(bot, kNearMidnight + 1).allowed);  // $3 of $3, from the journal
  EXPECT_EQ(acc->totals().requests, 3u);
  // A flush folds the journal into the snapshot and drops what it covers: nothing twice.
  acc->flush();
  acc.reset();
  auto again = make_cost_accounting(cfg, registry);
  EXPECT_EQ(again->totals().requests, 3u);
  EXPECT_NEAR(again->totals().request_usd, 3.0, 1e-9);
  std::filesystem::remove_all(dir);
}

TEST(Budgets, CorruptJournalLinesAreSkippedAndTheRestCounts) {
  const auto dir = std::filesystem::temp_directory_path() / ("tidegate-cost-journal-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const auto cfg = testing::config_from(
      budget_config("data_dir: " + dir.string() + "\nbudgets:\n  - {scope: 'key:*', period: month, hard_usd: 3}\n"));
  const RequestLabels bot{"paid", "acme", "ci-bot", {}};
  {
    prometheus::Registry registry;
    auto acc = make_cost_accounting(cfg, registry);
    settle(*acc, bot, 3, kNearMidnight);
    // No flush: the destructor's would fold the journal in. Take a copy of the journal first.
    std::filesystem::copy_file(dir / "budget_spend.log.0", dir / "copy");
  }
  std::filesystem::remove(dir / "budget_spend.json");
  std::filesystem::rename(dir / "copy", dir / "budget_spend.log.0");
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename() != "budget_spend.log.0") std::filesystem::remove(e.path());
  {  // flip one digit of the second record's amount: its checksum no longer matches
    std::fstream f(dir / "budget_spend.log.0", std::ios::in | std::ios::out | std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const auto second = text.find('\n') + 1;
    const auto usd = text.find("\"usd\":", second) + 6;
    text[usd] = text[usd] == '9' ? '8' : '9';
    f.seekp(0);
    f << text;
  }
  prometheus::Registry registry;
  auto acc = make_cost_accounting(cfg, registry);
  EXPECT_EQ(metric_sum(registry, "tidegate_cost_events_total", "reason", "spend_journal_corrupt"), 1);
  EXPECT_EQ(acc->totals().requests, 2u);
  EXPECT_TRUE(acc->check_budget(bot, kNearMidnight + 1).allowed);  // $2 of $3
  std::filesystem::remove_all(dir);
}

TEST(Budgets, AFullDiskIsCountedAndRequestsStillSettle) {
  const auto dir = std::filesystem::temp_directory_path() / ("tidegate-cost-full-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink("/dev/full", dir / "budget_spend.log.0");  // every write: ENOSPC
  prometheus::Registry registry;
  auto acc = make_cost_accounting(
      testing::config_from(budget_config("data_dir: " + dir.string() + "\nbudgets:\n  - {scope: 'key:*', period: month, hard_usd: 3}\n")),
      registry);
  const RequestLabels bot{"paid", "acme", "ci-bot", {}};
  const auto h = acc->request_started(bot, "u", kNearMidnight);
  acc->request_progress(h, 1, 0, kNearMidnight);
  EXPECT_NEAR(acc->request_finished(h, kNearMidnight), 1.0, 1e-9);
  EXPECT_EQ(metric_sum(registry, "tidegate_cost_events_total", "reason", "spend_journal_write_failed"), 1);
  acc.reset();
  std::filesystem::remove_all(dir);
}

TEST(Budgets, CorruptSpendFileIsReportedNotFatal) {
  const auto dir = std::filesystem::temp_directory_path() / ("tidegate-cost-bad-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  { std::ofstream(dir / "budget_spend.json") << "{not json"; }
  prometheus::Registry registry;
  auto acc = make_cost_accounting(testing::config_from("data_dir: " + dir.string() + "\n"), registry);
  EXPECT_EQ(metric_sum(registry, "tidegate_cost_events_total", "reason", "spend_load_failed"), 1);
  std::filesystem::remove_all(dir);
}

TEST(Budgets, ThreadsRacingToTheLimitOvershootAtMostOneRequestEach) {
  prometheus::Registry registry;
  auto acc = make_cost_accounting(
      testing::config_from(budget_config("budgets:\n  - {scope: 'tenant:acme', period: month, hard_usd: 20}\n")),
      registry);
  constexpr int kThreads = 8;
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      const RequestLabels acme{"paid", "acme", "k" + std::to_string(i), {}};
      for (int n = 0; n < 1000; ++n) {
        if (!acc->check_budget(acme, kNearMidnight).allowed) return;
        admitted++;
        const auto h = acc->request_started(acme, "u", kNearMidnight);
        std::this_thread::yield();  // widen the window between check and charge
        acc->request_progress(h, 1, 0, kNearMidnight);
        acc->request_finished(h, kNearMidnight);
      }
    });
  for (auto& t : threads) t.join();
  const double spent = admitted * 1.0;  // each request costs $1 here
  EXPECT_GE(spent, 20.0);
  EXPECT_LE(spent, 20.0 + kThreads * 1.0);
  EXPECT_DOUBLE_EQ(metric_sum(registry, "tidegate_budget_spend_usd", "scope", "tenant:acme"), spent);
  EXPECT_FALSE(acc->check_budget({"paid", "acme", "k", {}}, kNearMidnight).allowed);
}

}  // namespace
}  // namespace tidegate::cost
