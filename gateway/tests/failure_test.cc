// The failure table (failure.h) walked row by row: every row is reachable by its enum, names
// and codes are unique where they must be, and each row's status, OpenAI type, code and
// retry rule agree with one another, so a new row cannot drift from the rest.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "failure.h"
#include "openai.h"
#include "tidegate/gateway/gateway.h"

namespace tidegate::gateway {
namespace {

TEST(FailureTable, EveryRowIsConsistent) {
  // Names are labels of two metric families: upstream_errors_total (attempts, and the answer
  // that was too large) and local_replies_total (the rest); unique within each.
  std::set<std::string_view> upstream_names, local_names;
  for (std::size_t i = 0; i < kFailures.size(); ++i) {
    const auto& row = kFailures[i];
    SCOPED_TRACE(std::string(row.name));
    EXPECT_EQ(static_cast<std::size_t>(row.failure), i);
    const bool upstream_family = row.upstream || row.failure == Failure::kUpstreamBodyTooLarge;
    EXPECT_TRUE((upstream_family ? upstream_names : local_names).insert(row.name).second) << "duplicate name";
    EXPECT_FALSE(row.code.empty());
    for (const char c : row.name) EXPECT_TRUE((c >= 'a' && c <= 'z') || c == '_') << "a metric label: snake_case";
    // The type follows the status, as OpenAI's API uses them.
    const std::string_view expected_type = row.status == 401   ? "authentication_error"
                                           : row.status == 403 ? "permission_error"
                                           : row.status == 429 ? "rate_limit_error"
                                           : row.status < 500  ? "invalid_request_error"
                                                               : "server_error";
    EXPECT_EQ(row.type, expected_type);
    EXPECT_GE(row.status, 400);
    EXPECT_LE(row.status, 599);
    if (row.upstream) {
      // What the client gets when the last attempt fails, by kind.
      if (row.code == "upstream_timeout") {
        EXPECT_EQ(row.status, 504);
        EXPECT_FALSE(row.retryable) << "a spent budget is not retried";
        EXPECT_TRUE(row.deadline);
      } else if (row.code == "no_ready_replica") {
        EXPECT_EQ(row.status, 503);
      } else {
        EXPECT_EQ(row.code, "upstream_error");
      }
      EXPECT_TRUE(row.replies);
    } else {
      EXPECT_FALSE(row.retryable);
      EXPECT_FALSE(row.deadline);
    }
    // The error a failure produces is its row.
    const auto e = api_error(row.failure, "m", "p");
    EXPECT_EQ(e.status, row.status);
    EXPECT_EQ(e.type, row.type);
    EXPECT_EQ(e.code, row.code);
    EXPECT_EQ(e.param, "p");
    EXPECT_EQ(e.failure, row.failure);
  }
  // A local reply's code is its metric label, so the two cannot differ again (the admin key's
  // did: counted "bad_admin_key", answered "invalid_admin_key").
  for (const auto& row : kFailures) {
    if (!row.upstream && row.failure != Failure::kUpstreamBodyTooLarge) {
      EXPECT_EQ(row.name, row.code);
    }
  }
  EXPECT_EQ(spec(Failure::kInvalidAdminKey).code, "invalid_admin_key");
}

TEST(FailureTable, RetriesOnlyWhatAnotherReplicaCouldServe) {
  for (const auto f : {Failure::kResolveFailed, Failure::kConnectFailed, Failure::kConnectTimeout, Failure::kWriteFailed,
                       Failure::kReadFailed, Failure::kBadStatus})
    EXPECT_TRUE(spec(f).retryable) << spec(f).name;
  // Past the response head (part of the answer was relayed) or past the client's budget: no.
  for (const auto f : {Failure::kWriteTimeout, Failure::kFirstByteTimeout, Failure::kBodyReadFailed, Failure::kBodyTimeout,
                       Failure::kStreamIdleTimeout, Failure::kStreamBroken, Failure::kStreamTruncated,
                       Failure::kStreamEventTooLarge, Failure::kTotalTimeout, Failure::kUpstreamBodyTooLarge})
    EXPECT_FALSE(spec(f).retryable) << spec(f).name;
  // A dead host's connect deadline is the fleet being unreachable, not the client's budget.
  EXPECT_EQ(spec(Failure::kConnectTimeout).status, 503);
  EXPECT_TRUE(spec(Failure::kConnectTimeout).deadline);
  EXPECT_FALSE(spec(Failure::kHeaderTimeout).replies);
  EXPECT_FALSE(spec(Failure::kClientDisconnected).replies);
}

TEST(FailureTable, AFiltersRateLimitRefusalIsItsRow) {
  const auto r = refusal(Refusal::kRateLimited, "Rate limit reached for tenant:acme", 12.2);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.reason, "rate_limit_exceeded");  // tidegate_local_replies_total's label
  const auto body = boost::json::parse(r.body).as_object().at("error").as_object();
  EXPECT_EQ(body.at("type").as_string(), "rate_limit_error");
  EXPECT_EQ(body.at("code").as_string(), "rate_limit_exceeded");
  EXPECT_EQ(body.at("message").as_string(), "Rate limit reached for tenant:acme");
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Retry-After");
  EXPECT_EQ(r.headers[0].second, "13");  // rounded up: a client retrying at 12 s would be refused
  EXPECT_TRUE(refusal(Refusal::kRateLimited, "x").headers.empty());
}

}  // namespace
}  // namespace tidegate::gateway
