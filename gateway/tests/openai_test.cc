#include <gtest/gtest.h>

#include "openai.h"

using namespace tidegate::gateway;
namespace json = boost::json;

namespace {
std::optional<ApiError> parse(Endpoint e, const std::string& body, ParsedRequest* out = nullptr) {
  ParsedRequest p;
  auto r = parse_request(e, body, p);
  if (out) *out = std::move(p);
  return r;
}
}  // namespace

TEST(ErrorBody, OpenAIShape) {
  ApiError e = bad_request("bad", "model", "missing_model");
  auto v = json::parse(error_body(e)).as_object().at("error").as_object();
  EXPECT_EQ(v.at("message").as_string(), "bad");
  EXPECT_EQ(v.at("type").as_string(), "invalid_request_error");
  EXPECT_EQ(v.at("param").as_string(), "model");
  EXPECT_EQ(v.at("code").as_string(), "missing_model");
  auto n = json::parse(error_body(error_with_status(503, "x", ""))).as_object().at("error").as_object();
  EXPECT_TRUE(n.at("param").is_null());
  EXPECT_TRUE(n.at("code").is_null());
  EXPECT_EQ(error_with_status(429, "x", "q").type, "rate_limit_error");
  EXPECT_EQ(error_with_status(401, "x", "k").type, "authentication_error");
}

TEST(ParseRequest, Rejections) {
  EXPECT_EQ(parse(Endpoint::kChat, "{nope")->code, "invalid_json");
  EXPECT_EQ(parse(Endpoint::kChat, "[1]")->code, "invalid_json");
  EXPECT_EQ(parse(Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}]})")->code, "missing_model");
  EXPECT_EQ(parse(Endpoint::kChat, R"({"model":5,"messages":[]})")->param, "model");
  EXPECT_EQ(parse(Endpoint::kChat, R"({"model":"m","messages":[]})")->code, "empty_messages");
  EXPECT_EQ(parse(Endpoint::kChat, R"({"model":"m","messages":"hi"})")->code, "invalid_type");
  EXPECT_EQ(parse(Endpoint::kChat, R"({"model":"m","messages":[{}],"stream":"yes"})")->param, "stream");
  EXPECT_EQ(parse(Endpoint::kChat, R"({"model":"m","messages":[{}],"max_tokens":1.5})")->param, "max_tokens");
  EXPECT_EQ(parse(Endpoint::kChat, R"({"model":"m","messages":[{}],"temperature":"hot"})")->param, "temperature");
  EXPECT_EQ(parse(Endpoint::kCompletions, R"({"model":"m","prompt":""})")->code, "empty_prompt");
  EXPECT_EQ(parse(Endpoint::kEmbeddings, R"({"model":"m"})")->code, "missing_input");
  for (auto* e : {"{nope", "[1]"}) EXPECT_EQ(parse(Endpoint::kChat, e)->status, 400);
}

TEST(ParseRequest, ForwardsUntouchedUnlessUsageNeeded) {
  ParsedRequest p;
  const std::string body = R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_p":0.5,"seed":3})";
  ASSERT_FALSE(parse(Endpoint::kChat, body, &p));
  EXPECT_EQ(p.upstream_body(), body);
  EXPECT_FALSE(p.usage_injected);

  const std::string streamed = R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"logit_bias":{"1":2}})";
  ASSERT_FALSE(parse(Endpoint::kChat, streamed, &p));
  EXPECT_TRUE(p.usage_injected);
  auto up = json::parse(p.upstream_body()).as_object();
  EXPECT_EQ(up.at("stream_options").at("include_usage").as_bool(), true);
  EXPECT_EQ(up.at("logit_bias").at("1").as_int64(), 2);

  const std::string asked = R"({"model":"m","messages":[{}],"stream":true,"stream_options":{"include_usage":true}})";
  ASSERT_FALSE(parse(Endpoint::kChat, asked, &p));
  EXPECT_FALSE(p.usage_injected);
  EXPECT_TRUE(p.client_wants_usage);
  EXPECT_EQ(p.upstream_body(), asked);
}

TEST(ConstantTimeEqual, Basics) {
  EXPECT_TRUE(constant_time_equal("secret-key-1", "secret-key-1"));
  EXPECT_FALSE(constant_time_equal("secret-key-1", "secret-key-2"));
  EXPECT_FALSE(constant_time_equal("secret", "secret-key"));
  EXPECT_FALSE(constant_time_equal("", "x"));
}
