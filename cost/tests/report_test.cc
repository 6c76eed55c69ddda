// Reports by tenant/model/tag in JSON and CSV, time ranges, hints, and the dashboard snapshot.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <regex>

#include "test_util.h"
#include "tidegate/common/json_text.h"

namespace tidegate::cost {
using common::to_json_text;
namespace {

// Any number written with an exponent (2.68E2, 1e-05) outside the JSON's strings.
bool has_exponent(const std::string& json) {
  const auto bare = std::regex_replace(json, std::regex(R"("(?:[^"\\]|\\.)*")"), "\"\"");
  return std::regex_search(bare, std::regex("[0-9.][eE][-+]?[0-9]"));
}

constexpr double kT0 = 1796000040.0;  // a minute boundary (divisible by 60)

class Reports : public ::testing::Test {
 protected:
  prometheus::Registry registry;
  std::unique_ptr<CostAccounting> acc = make_cost_accounting(
      testing::config_from(std::string(testing::kOneDollarPerSecond) + "tags: {labels: [team]}\n"), registry);

  void serve(const RequestLabels& l, double t0, double t1, std::int64_t prompt, std::int64_t completion) {
    const auto h = acc->request_started(l, "r1", t0);
    acc->request_progress(h, prompt, completion, t1);
    acc->request_finished(h, t1);
  }
  boost::json::object json(const std::string& by, std::optional<double> from, std::optional<double> to) {
    const auto [body, type] = acc->report(by, from, to, "json");
    EXPECT_EQ(type, "application/json");
    return boost::json::parse(body).as_object();
  }
};

TEST_F(Reports, ByTenantModelTagInJsonAndCsv) {
  acc->replica_state("r1", "llama", "", ReplicaState::kActive, kT0);
  serve({"llama", "acme", "k", {{"team", "ml"}}}, kT0, kT0 + 10, 1000, 250);    // $10, 1250 tokens
  serve({"llama", "globex", "k", {{"team", "web"}}}, kT0 + 10, kT0 + 15, 0, 500);  // $5
  acc->advance(kT0 + 20);                                                         // idle 5 s
  double saving = 0;
  acc->cache_hit({"llama", "globex", "k", {}}, 0, 100, kT0 + 20, &saving);

  const auto by_tenant = json("tenant", kT0, kT0 + 60);
  std::map<std::string, boost::json::object> rows;
  for (const auto& r : by_tenant.at("rows").as_array()) rows[std::string(r.at("tenant").as_string())] = r.as_object();
  EXPECT_NEAR(rows["acme"].at("cost_usd").to_number<double>(), 10, 1e-9);
  EXPECT_NEAR(rows["acme"].at("cost_per_1k_tokens").to_number<double>(), 10.0 / 1.25, 1e-9);
  EXPECT_NEAR(rows["globex"].at("cost_usd").to_number<double>(), 5.001, 1e-9);
  EXPECT_NEAR(rows["globex"].at("cache_savings_usd").to_number<double>(), saving, 1e-12);
  EXPECT_GT(saving, 0);
  EXPECT_NEAR(rows["(idle)"].at("cost_usd").to_number<double>(), 5, 1e-9);
  EXPECT_NEAR(by_tenant.at("totals").at("idle_share").to_number<double>(), 5 / 20.001, 1e-9);

  const auto by_model = json("model", std::nullopt, std::nullopt);
  EXPECT_NEAR(by_model.at("rows").at(0).at("idle_usd").to_number<double>(), 5, 1e-9);
  const auto by_tag = json("tag", kT0, kT0 + 60);
  EXPECT_EQ(by_tag.at("rows").as_array().size(), 2u);

  const auto [csv, type] = acc->report("tenant", kT0, kT0 + 60, "csv");
  EXPECT_EQ(type, "text/csv; charset=utf-8");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "tenant,requests,prompt_tokens,completion_tokens,tokens,cost_usd,cost_per_1k_tokens,cache_hits,"
            "cache_savings_usd,idle_usd,standby_usd");
  EXPECT_NE(csv.find("\nacme,1,1000,250,1250,10,8,0,0,0,0\n"), std::string::npos) << csv;

  // A range that ends before the requests sees nothing of them.
  EXPECT_TRUE(json("tenant", kT0 - 600, kT0).at("rows").as_array().size() == 2);  // only the shared rows
  const auto [err, err_type] = acc->report("colour", std::nullopt, std::nullopt, "json");
  EXPECT_NE(err.find("\"error\""), std::string::npos);
  EXPECT_NE(acc->report("tenant", std::nullopt, std::nullopt, "xml").first.find("format"), std::string::npos);
}

TEST_F(Reports, HintsIdleReplicasAndOversizedWarmPool) {
  for (int i = 0; i < 4; ++i) acc->replica_state("w" + std::to_string(i), "llama", "half", ReplicaState::kWarm, kT0);
  acc->replica_state("r1", "llama", "", ReplicaState::kActive, kT0);
  serve({"llama", "acme", "k", {}}, kT0, kT0 + 10, 10, 10);
  acc->replica_state("w0", "llama", "half", ReplicaState::kActive, kT0 + 20);  // a burst of one promotion
  acc->advance(kT0 + 120);
  const auto rep = json("model", kT0, kT0 + 180);
  std::set<std::string> kinds;
  for (const auto& h : rep.at("hints").as_array()) {
    kinds.insert(std::string(h.at("kind").as_string()));
    if (h.at("kind").as_string() == "oversized_warm_pool") {
      EXPECT_EQ(h.at("max_warm_pool").to_number<double>(), 4);
      EXPECT_EQ(h.at("max_promotions_per_window").to_number<double>(), 1);
    }
  }
  EXPECT_TRUE(kinds.count("idle_replicas"));
  EXPECT_TRUE(kinds.count("oversized_warm_pool"));
}

TEST_F(Reports, DashboardSnapshotCarriesLiveSeries) {
  acc->replica_state("r1", "llama", "", ReplicaState::kActive, kT0);
  acc->replica_state("w1", "llama", "", ReplicaState::kWarm, kT0);
  for (int i = 0; i < 30; ++i) serve({"llama", i % 2 ? "acme" : "globex", "k", {}}, kT0 + i, kT0 + i + 1, 10, 10);
  acc->cache_hit({"llama", "acme", "k", {}}, 10, 10, kT0 + 31, nullptr);
  const auto snap = acc->dashboard_snapshot(kT0 + 40);
  EXPECT_EQ(snap.at("version").as_int64(), 1);
  const auto& series = snap.at("series").as_object();
  for (const char* name : {"requests_per_s", "cost_by_tenant", "cost_by_model", "cache_savings", "cache_hit_ratio",
                           "replicas_by_state", "tokens_per_s"}) {
    ASSERT_TRUE(series.contains(name)) << name;
    EXPECT_FALSE(series.at(name).at("lines").as_object().empty()) << name;
  }
  const auto& tenants = series.at("cost_by_tenant").at("lines").as_object();
  EXPECT_TRUE(tenants.contains("acme"));
  EXPECT_TRUE(tenants.contains("(standby)"));
  const auto& active = series.at("replicas_by_state").at("lines").at("active").as_array();
  EXPECT_EQ(active.size(), 120u);
  EXPECT_EQ(active.back().at(1).to_number<double>(), 1);
  double reqs = 0;
  for (const auto& p : series.at("requests_per_s").at("lines").at("llama").as_array())
    reqs += p.at(1).to_number<double>() * snap.at("step_s").to_number<double>();
  EXPECT_NEAR(reqs, 31, 1e-9);
  EXPECT_EQ(snap.at("totals").at("cache_hits").to_number<double>(), 1);
}

// Issue 17: behind llama.cpp the report read "requests":2.68E2 and "cost_usd":4.2E-5.
TEST_F(Reports, CountsAreJsonIntegersAndMoneyPlainDecimals) {
  acc->replica_state("r1", "llama", "", ReplicaState::kActive, kT0);
  for (int i = 0; i < 268; ++i)
    serve({"llama", "acme", "k", {{"team", "ml"}}}, kT0 + i * 0.1, kT0 + i * 0.1 + 0.0000421, 1234567, 89);
  acc->cache_hit({"llama", "acme", "k", {}}, 10, 20, kT0 + 30, nullptr);
  acc->advance(kT0 + 40);
  for (const char* by : {"tenant", "model", "tag"}) {
    const auto [body, type] = acc->report(by, kT0, kT0 + 60, "json");
    EXPECT_FALSE(has_exponent(body)) << body;
    const auto rep = boost::json::parse(body).as_object();
    for (const auto& r : rep.at("rows").as_array()) {
      for (const char* k : {"requests", "prompt_tokens", "completion_tokens", "tokens", "cache_hits"})
        EXPECT_TRUE(r.at(k).is_int64()) << by << " " << k << ": " << boost::json::serialize(r.at(k));
      for (const char* k : {"cost_usd", "cost_per_1k_tokens", "cache_savings_usd", "idle_usd", "standby_usd"})
        EXPECT_TRUE(r.at(k).is_number()) << by << " " << k;
    }
    const auto& first = rep.at("rows").at(0);  // acme, llama or team=ml: the served requests
    EXPECT_EQ(first.at("requests").as_int64(), 268) << by;
    EXPECT_EQ(first.at("prompt_tokens").as_int64(), 268 * 1234567) << by;
  }
  const auto [csv, csv_type] = acc->report("tenant", kT0, kT0 + 60, "csv");
  EXPECT_FALSE(has_exponent(csv)) << csv;
  EXPECT_NE(csv.find("\nacme,268,330863956,23852,330887808,"), std::string::npos) << csv;
  EXPECT_FALSE(has_exponent(to_json_text(acc->dashboard_snapshot(kT0 + 41))));
}

TEST(ReportText, ExponentDetectorSeesExponentsOnlyOutsideStrings) {
  EXPECT_TRUE(has_exponent(R"({"requests":2.68E2})"));
  EXPECT_TRUE(has_exponent(R"([1e-05])"));
  EXPECT_FALSE(has_exponent(R"({"k":"2.68E2","v":0.000042,"b":true,"f":false})"));
}

}  // namespace
}  // namespace tidegate::cost
