#include <gtest/gtest.h>

#include <string>
#include <vector>

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
  ApiError e = api_error(Failure::kMissingModel, "bad", "model");
  auto v = json::parse(error_body(e)).as_object().at("error").as_object();
  EXPECT_EQ(v.at("message").as_string(), "bad");
  EXPECT_EQ(v.at("type").as_string(), "invalid_request_error");
  EXPECT_EQ(v.at("param").as_string(), "model");
  EXPECT_EQ(v.at("code").as_string(), "missing_model");
  ApiError no_code = api_error(Failure::kNoReadyReplica, "x");
  no_code.code.clear();
  auto n = json::parse(error_body(no_code)).as_object().at("error").as_object();
  EXPECT_TRUE(n.at("param").is_null());
  EXPECT_TRUE(n.at("code").is_null());
  EXPECT_EQ(api_error(Failure::kQueueFull, "x").type, "rate_limit_error");
  EXPECT_EQ(api_error(Failure::kInvalidApiKey, "x").type, "authentication_error");
  EXPECT_EQ(error_type_for_status(429), "rate_limit_error");
  EXPECT_EQ(error_type_for_status(401), "authentication_error");
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
  // 0 is refused as OpenAI refuses it (llama.cpp would read it as "no limit").
  EXPECT_EQ(parse(Endpoint::kChat, R"({"model":"m","messages":[{}],"max_tokens":0})")->code, "invalid_value");
  EXPECT_EQ(parse(Endpoint::kChat, R"({"model":"m","messages":[{}],"max_completion_tokens":0})")->param,
            "max_completion_tokens");
  EXPECT_FALSE(parse(Endpoint::kChat, R"({"model":"m","messages":[{}],"max_tokens":1})"));
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

// include_usage is added by editing the client's text in one place, so every other byte passes
// as sent. Found by fuzz_request_scan: the earlier rewrite through Boost.JSON's DOM forwarded
// 0e214748 as "NaN" (no parser accepts it) and moved a 75-digit number by one ulp. Each case is
// the client's body and exactly what goes upstream, with and without the DOM.
TEST(ParseRequest, UsageIsAddedByEditingTheTextInOnePlace) {
  const std::string head = R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream":true)";
  const std::string big = "999999999999999999999999999999999999999999999999999999999999999999999999991";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {head + "}", head + R"(,"stream_options":{"include_usage":true}})"},
      {head + R"(,"stream_options":null})", head + R"(,"stream_options":{"include_usage":true}})"},
      {head + R"(,"stream_options": { } })", head + R"(,"stream_options": {"include_usage":true} })"},
      {head + R"(,"stream_options":{"x":)" + big + "}}", head + R"(,"stream_options":{"include_usage":true,"x":)" + big + "}}"},
      {head + R"(,"x_weight":1e400,"stream_options":{"continuous_usage_stats":false}})",
       head + R"(,"x_weight":1e400,"stream_options":{"include_usage":true,"continuous_usage_stats":false}})"},
      {head + R"(,"w":0e214748,"stream_options":{"include_usage":false, "x":1.50}})",
       head + R"(,"w":0e214748,"stream_options":{"include_usage":true, "x":1.50}})"},
      // Repeated keys: the last stream_options and its last include_usage are the ones read.
      {head + R"(,"stream_options":{"include_usage":true},"stream_options":{"include_usage":null,"include_usage":false}})",
       head + R"(,"stream_options":{"include_usage":true},"stream_options":{"include_usage":null,"include_usage":true}})"},
      {head + R"(,"stream_options":{"include_usage":true},"stream_options":null})",
       head + R"(,"stream_options":{"include_usage":true},"stream_options":{"include_usage":true}})"},
  };
  for (const auto& [body, want] : cases) {
    for (const bool dom : {true, false}) {
      ParsedRequest p;
      ASSERT_FALSE(parse_request(Endpoint::kChat, body, p, dom)) << body;
      EXPECT_TRUE(p.usage_injected) << body;
      EXPECT_EQ(p.upstream_body(), want) << (dom ? "with" : "without") << " the DOM";
    }
    // What a last-key-wins parser reads upstream: include_usage is true.
    json::error_code ec;
    const auto up = json::parse(want, ec);
    if (!ec) {
      EXPECT_TRUE(up.as_object().at("stream_options").at("include_usage").as_bool()) << want;
    }
  }
}

TEST(ConstantTimeEqual, Basics) {
  EXPECT_TRUE(constant_time_equal("secret-key-1", "secret-key-1"));
  EXPECT_FALSE(constant_time_equal("secret-key-1", "secret-key-2"));
  EXPECT_FALSE(constant_time_equal("secret", "secret-key"));
  EXPECT_FALSE(constant_time_equal("", "x"));
}

namespace {

// Bodies at the edges of JSON validity and of each field's rules.
std::vector<std::string> request_corpus() {
  const std::string chat = R"("model":"m","messages":[{"role":"user","content":"x"}])";
  std::vector<std::string> v = {
      "{" + chat + "}",
      "{" + chat + R"(,"stream":true})",
      "{" + chat + R"(,"stream":true,"stream_options":null})",
      "{" + chat + R"(,"stream":true,"stream_options":{}})",
      "{" + chat + R"(,"stream":true,"stream_options":{ }})",
      "{" + chat + R"(,"stream":true,"stream_options":{"include_usage":false}})",
      "{" + chat + R"(,"stream":true,"stream_options":{"include_usage":null,"x":1}})",
      "{" + chat + R"(,"stream":true,"stream_options":{"include_usage":true}})",
      "{" + chat + R"(,"stream":true,"stream_options":{"include_usage":true},"stream_options":null})",
      "{" + chat + R"(,"stream":true,"stream_options":{"include_usage":"yes"}})",
      "{" + chat + R"(,"stream":true,"stream_options":[]})",
      " {\n\t" + chat + " ,\r\n \"stream\" : true } \n",
      "{" + chat + R"(,"model":"second"})",
      "{" + chat + R"(,"model":null})",
      "{" + chat + R"(,"model":""})",
      R"({"mo\u0064el":"m\u00e9","messages":[{}]})",
      "{" + chat + R"(,"max_tokens":8,"max_completion_tokens":16})",
      "{" + chat + R"(,"max_tokens":-1})",
      "{" + chat + R"(,"max_tokens":1.0})",
      "{" + chat + R"(,"max_tokens":1e2})",
      "{" + chat + R"(,"max_tokens":9223372036854775807})",
      "{" + chat + R"(,"max_tokens":18446744073709551615})",
      "{" + chat + R"(,"max_tokens":18446744073709551616})",
      "{" + chat + R"(,"max_tokens":-9223372036854775809})",
      "{" + chat + R"(,"temperature":0.7,"n":2,"user":"u\n1"})",
      "{" + chat + R"(,"temperature":3})",
      "{" + chat + R"(,"temperature":-0})",
      "{" + chat + R"(,"temperature":1e400})",
      "{" + chat + R"(,"temperature":1e-400})",
      "{" + chat + R"(,"n":0})",
      "{" + chat + R"(,"n":129})",
      "{" + chat + R"(,"n":"2"})",
      "{" + chat + R"(,"user":5})",
      "{" + chat + R"(,"seed":1e400})",
      "{" + chat + R"(,"seed":01})",
      "{" + chat + R"(,"seed":1.})",
      "{" + chat + R"(,"seed":.5})",
      "{" + chat + R"(,"seed":-})",
      "{" + chat + R"(,})",
      "{" + chat + R"(,"x":[1,]})",
      "{" + chat + R"( /* comment */ })",
      "{" + chat + R"(,"x":tru})",
      "{" + chat + "} trailing",
      R"({"model":"m","messages":[]})",
      R"({"model":"m","messages":[{},"x"]})",
      R"({"model":"m","messages":{}})",
      R"({"model":"m","prompt":"","input":""})",
      R"({"model":"m","prompt":[],"input":[]})",
      R"({"model":"m","prompt":["a"],"input":"b"})",
      R"({"model":"m","prompt":5,"input":{}})",
      R"({"model":"m","prompt":"p","stream":true})",
      R"({"model":"m","input":"i","stream":true})",
      R"({"model":"m","messages":[{"content":"caf\u00e9 \ud83d\ude00"}]})",
      R"({"model":"m","messages":[{"content":"lone \ud83d"}]})",
      R"({"model":"m","messages":[{"content":"bad \x"}]})",
      "{\"model\":\"m\",\"messages\":[{\"content\":\"caf\xc3\xa9 \xf0\x9f\x98\x80\"}]}",
      "{\"model\":\"m\",\"messages\":[{\"content\":\"overlong \xc0\x80\"}]}",
      "{\"model\":\"m\",\"messages\":[{\"content\":\"surrogate \xed\xa0\x80\"}]}",
      "{\"model\":\"m\",\"messages\":[{\"content\":\"too high \xf4\x90\x80\x80\"}]}",
      "{\"model\":\"m\",\"messages\":[{\"content\":\"cut \xe2\x82\"}]}",
      "{\"model\":\"m\",\"messages\":[{\"content\":\"stray \x80\"}]}",
      "{\"model\":\"m\",\"messages\":[{\"content\":\"ctl \x01\"}]}",
      std::string("{\"model\":\"m\",\"messages\":[{\"content\":\"nul ") + '\0' + "\"}]}",
      "[1]", "\"s\"", "5", "null", "", "   ", "{", "{nope",
  };
  for (int depth : {30, 31, 32, 33}) {  // boost::json's default limit is 32 levels
    std::string deep = "{" + chat + ",\"x\":";
    for (int i = 0; i < depth - 1; ++i) deep += "[";
    for (int i = 0; i < depth - 1; ++i) deep += "]";
    v.push_back(deep + "}");
  }
  return v;
}

std::string describe(const std::optional<ApiError>& e, const ParsedRequest& p) {
  if (e) return "error " + std::to_string(e->status) + " " + e->code + " " + e->param + ": " + e->message;
  return "model=" + p.model + " stream=" + std::to_string(p.stream) + " wants_usage=" +
         std::to_string(p.client_wants_usage) + " max_tokens=" + (p.max_tokens ? std::to_string(*p.max_tokens) : "-") +
         " temperature=" + (p.temperature ? std::to_string(*p.temperature) : "-") + " n=" + std::to_string(p.n) +
         " user=" + p.user + " injected=" + std::to_string(p.usage_injected);
}

}  // namespace

// The scan that validates without a DOM agrees with boost::json on what is valid JSON, and
// gives the same verdict and fields whether or not the DOM is built too.
TEST(ParseRequest, ScanAgreesWithFullParse) {
  for (const auto& body : request_corpus()) {
    SCOPED_TRACE(body);
    json::error_code ec;
    (void)json::parse(body, ec);
    for (auto endpoint : {Endpoint::kChat, Endpoint::kCompletions, Endpoint::kEmbeddings}) {
      ParsedRequest with_dom, scan_only;
      const auto a = parse_request(endpoint, body, with_dom, true);
      const auto b = parse_request(endpoint, body, scan_only, false);
      EXPECT_EQ(ec.failed(), b && b->message.rfind("request body is not valid JSON", 0) == 0) << ec.message();
      EXPECT_EQ(describe(a, with_dom), describe(b, scan_only));
      if (a) continue;
      EXPECT_EQ(with_dom.upstream_body(), scan_only.upstream_body());
      EXPECT_TRUE(with_dom.json && !scan_only.json);
      const auto original = json::parse(body).as_object();
      EXPECT_EQ(std::string(original.at("model").as_string()), scan_only.model);  // duplicates: the last wins
      auto sent = json::parse(scan_only.upstream_body()).as_object();
      if (scan_only.stream) {  // the replica is always asked for usage; nothing else changes
        EXPECT_EQ(sent.at("stream_options").at("include_usage"), json::value(true));
        sent.erase("stream_options");
        auto rest = original;
        rest.erase("stream_options");
        EXPECT_EQ(sent, rest);
      } else {
        EXPECT_EQ(scan_only.upstream_body(), body);
      }
    }
  }
}

TEST(ParseRequest, IntegersBeyondInt64AreRefusedNotThrown) {
  const auto e = parse(Endpoint::kChat, R"({"model":"m","messages":[{}],"max_tokens":18446744073709551615})");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "invalid_value");
  EXPECT_EQ(e->param, "max_tokens");
}
