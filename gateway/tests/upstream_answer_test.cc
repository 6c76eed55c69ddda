// Engines' real error bodies (copied from what each one sends) and what the gateway makes of
// them: whose fault it is, and the OpenAI error object the client gets.
#include "upstream_answer.h"

#include <gtest/gtest.h>

namespace tidegate::gateway {
namespace {

// llama.cpp: /v1/embeddings on a server started without --embeddings.
constexpr const char* kLlamaNotSupported =
    R"({"error":{"code":501,"message":"This server does not support embeddings. Start it with `--embeddings`","type":"not_supported_error"}})";
// llama.cpp: an image sent to a text-only model (a std::runtime_error in its handler -> 500).
constexpr const char* kLlamaImage =
    R"({"error":{"code":500,"message":"image input is not supported - hint: if this is unexpected, you may need to provide the mmproj","type":"server_error"}})";
constexpr const char* kLlamaContext =
    R"({"error":{"code":400,"message":"request (3050 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":3050,"n_ctx":2048}})";
constexpr const char* kLlamaLoading = R"({"error":{"code":503,"message":"Loading model","type":"unavailable_error"}})";
constexpr const char* kVllmOldContext =
    R"({"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 4096 tokens (3000 in the messages, 1096 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400})";
constexpr const char* kVllmNewContext =
    R"({"error":{"message":"The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that `max_model_len` is no smaller than the number of text tokens.","type":"BadRequestError","param":null,"code":400}})";
constexpr const char* kSglangContext =
    R"({"object":"error","message":"The input (5000 tokens) is longer than the model's context length (4096 tokens).","type":"BadRequestError","param":null,"code":400})";
constexpr const char* kTgiValidation =
    R"({"error":"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens and 200 `max_new_tokens`","error_type":"validation"})";
constexpr const char* kVllmEngineDead =
    R"({"error":{"message":"EngineCore encountered an issue. See stack trace (above) for the root cause.","type":"InternalServerError","param":null,"code":500}})";

TEST(UpstreamAnswer, ClassifiesWhoseFaultItIs) {
  EXPECT_EQ(classify_upstream_answer(200, "{}"), UpstreamFault::kNone);
  EXPECT_EQ(classify_upstream_answer(400, kLlamaContext), UpstreamFault::kRequest);
  EXPECT_EQ(classify_upstream_answer(404, ""), UpstreamFault::kRequest);
  EXPECT_EQ(classify_upstream_answer(429, ""), UpstreamFault::kRequest);
  EXPECT_EQ(classify_upstream_answer(501, kLlamaNotSupported), UpstreamFault::kRequest);
  EXPECT_EQ(classify_upstream_answer(501, ""), UpstreamFault::kRequest);  // not implemented, whatever the body
  // An error object is the engine's handler refusing: this input, or its own trouble.
  EXPECT_EQ(classify_upstream_answer(500, kLlamaImage), UpstreamFault::kUnclear);
  EXPECT_EQ(classify_upstream_answer(500, kVllmEngineDead), UpstreamFault::kUnclear);
  EXPECT_EQ(classify_upstream_answer(500, "<html>Internal Server Error</html>"), UpstreamFault::kReplica);
  EXPECT_EQ(classify_upstream_answer(500, ""), UpstreamFault::kReplica);
  EXPECT_EQ(classify_upstream_answer(500, R"({"detail":"oops"})"), UpstreamFault::kReplica);
  EXPECT_EQ(classify_upstream_answer(503, kLlamaLoading), UpstreamFault::kReplica);
  EXPECT_EQ(classify_upstream_answer(502, ""), UpstreamFault::kReplica);
  EXPECT_EQ(classify_upstream_answer(504, R"({"error":{"message":"x"}})"), UpstreamFault::kReplica);
}

TEST(UpstreamAnswer, ContextOverflowIsOpenAIsCodeOnEveryEngine) {
  for (const char* body : {kLlamaContext, kVllmOldContext, kVllmNewContext, kSglangContext, kTgiValidation}) {
    const auto e = normalize_engine_error(400, body);
    EXPECT_EQ(e.code, "context_length_exceeded") << body;
    EXPECT_EQ(e.type, "invalid_request_error") << body;
    EXPECT_EQ(e.status, 400);
  }
  EXPECT_NE(normalize_engine_error(400, kLlamaContext).message.find("exceeds the available context size"), std::string::npos);
  EXPECT_NE(normalize_engine_error(422, kTgiValidation).message.find("Input validation error"), std::string::npos);
}

TEST(UpstreamAnswer, CodesAreStringsAndMessagesAreKept) {
  auto e = normalize_engine_error(501, kLlamaNotSupported);
  EXPECT_EQ(e.code, "not_implemented");
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.message, "This server does not support embeddings. Start it with `--embeddings`");
  e = normalize_engine_error(500, kLlamaImage);
  EXPECT_EQ(e.code, "upstream_error");
  EXPECT_EQ(e.type, "server_error");
  EXPECT_NE(e.message.find("image input is not supported"), std::string::npos);
  e = normalize_engine_error(503, kLlamaLoading);
  EXPECT_EQ(e.code, "upstream_unavailable");
  EXPECT_EQ(e.message, "Loading model");
  // A string code the engine chose is kept; a param too.
  e = normalize_engine_error(400, R"({"error":{"message":"bad","type":"invalid_request_error","param":"temperature","code":"invalid_value"}})");
  EXPECT_EQ(e.code, "invalid_value");
  EXPECT_EQ(e.param, "temperature");
  // Not JSON: the status and a prefix of the body.
  e = normalize_engine_error(500, std::string(1000, 'x'));
  EXPECT_EQ(e.message.rfind("upstream answered 500: xxx", 0), 0u);
  EXPECT_LT(e.message.size(), 300u);
  // The wire form: code is a JSON string, never the engine's integer.
  const auto body = error_body(normalize_engine_error(400, kVllmOldContext));
  EXPECT_NE(body.find(R"("code":"context_length_exceeded")"), std::string::npos) << body;
}

TEST(UpstreamAnswer, ServerErrorsAreNotContextOverflows) {
  // The context phrases only mean the client's input at 4xx; a 500 mentioning a context stays a 500.
  EXPECT_EQ(normalize_engine_error(500, R"({"error":{"message":"failed to allocate context size buffer","type":"server_error"}})").code,
            "upstream_error");
}

}  // namespace
}  // namespace tidegate::gateway
