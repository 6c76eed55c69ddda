#include <gtest/gtest.h>

#include "sse.h"

using namespace tidegate::gateway;

namespace {
struct OwnedEvent {
  std::string raw, data, event;
};
std::vector<OwnedEvent> feed_all(SseParser& p, const std::vector<std::string>& pieces) {
  std::vector<OwnedEvent> out;
  for (const auto& piece : pieces) {
    p.feed(piece);
    SseEvent e;
    while (p.next(e)) out.push_back({std::string(e.raw), std::string(e.data), std::string(e.event)});
  }
  return out;
}
}  // namespace

TEST(SseParser, WholeEvents) {
  SseParser p;
  auto ev = feed_all(p, {"data: {\"a\":1}\n\ndata: [DONE]\n\n"});
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].data, "{\"a\":1}");
  EXPECT_EQ(ev[0].raw, "data: {\"a\":1}\n\n");
  EXPECT_EQ(ev[1].data, "[DONE]");
  EXPECT_EQ(p.pending_bytes(), 0u);
}

TEST(SseParser, SplitAtEveryByte) {
  const std::string text = "event: x\r\ndata: one\r\ndata: two\r\n\r\n: comment\n\ndata:three\n\n";
  SseParser p;
  std::vector<std::string> pieces;
  for (char c : text) pieces.emplace_back(1, c);
  auto ev = feed_all(p, pieces);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].event, "x");
  EXPECT_EQ(ev[0].data, "one\ntwo");
  EXPECT_EQ(ev[0].raw, "event: x\r\ndata: one\r\ndata: two\r\n\r\n");
  EXPECT_EQ(ev[1].data, "");  // comment-only event
  EXPECT_EQ(ev[2].data, "three");
}

TEST(SseParser, KeepsPartialEventUntilBlankLine) {
  SseParser p;
  auto ev = feed_all(p, {"data: par", "tial\n"});
  EXPECT_TRUE(ev.empty());
  EXPECT_GT(p.pending_bytes(), 0u);
  ev = feed_all(p, {"\n"});
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].data, "partial");
}

TEST(Accumulate, ChatDeltasUsageAndDone) {
  CompletionSummary s;
  EXPECT_FALSE(accumulate_stream_chunk(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]})", s).usage_only);
  EXPECT_TRUE(accumulate_stream_chunk(R"({"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]})", s).has_choices);
  EXPECT_TRUE(accumulate_stream_chunk(R"({"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}})", s).usage_only);
  accumulate_stream_chunk("[DONE]", s);
  EXPECT_EQ(s.content, "Hello");
  EXPECT_EQ(s.finish_reason, "stop");
  EXPECT_EQ(s.prompt_tokens, 7);
  EXPECT_EQ(s.completion_tokens, 2);
  EXPECT_TRUE(s.done);
}

// What vLLM and llama.cpp send around the tokens: a role chunk with empty content first, a
// finish chunk with none last. Neither is a token; counting them overcounted short streams.
TEST(Accumulate, OnlyChunksWithTextCountAsContent) {
  CompletionSummary s;
  EXPECT_FALSE(accumulate_stream_chunk(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})", s).has_content);
  EXPECT_FALSE(accumulate_stream_chunk(R"({"choices":[{"index":0,"delta":{"role":"assistant"}}]})", s).has_content);
  EXPECT_TRUE(accumulate_stream_chunk(R"({"choices":[{"index":0,"delta":{"content":"Hi"}}]})", s).has_content);
  EXPECT_FALSE(accumulate_stream_chunk(R"({"choices":[{"index":0,"delta":{"content":null}}]})", s).has_content);
  const auto finish = accumulate_stream_chunk(R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})", s);
  EXPECT_TRUE(finish.has_choices);
  EXPECT_FALSE(finish.has_content);
  EXPECT_TRUE(accumulate_stream_chunk(R"({"choices":[{"index":0,"text":"a"}]})", s).has_content);
  EXPECT_FALSE(accumulate_stream_chunk(R"({"choices":[{"index":0,"text":""}]})", s).has_content);
  EXPECT_FALSE(accumulate_stream_chunk(R"({"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}})", s).has_content);
}

TEST(Accumulate, CompletionsTextAndIgnoresOtherChoices) {
  CompletionSummary s;
  accumulate_stream_chunk(R"({"choices":[{"index":1,"text":"no"},{"index":0,"text":"yes"}]})", s);
  accumulate_stream_chunk("not json", s);
  EXPECT_EQ(s.content, "yes");
  EXPECT_EQ(s.prompt_tokens, -1);
}

TEST(Summarize, NonStreamBody) {
  CompletionSummary s;
  summarize_response_body(
      R"({"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1}})",
      s);
  EXPECT_EQ(s.content, "hi");
  EXPECT_EQ(s.finish_reason, "length");
  EXPECT_EQ(s.prompt_tokens, 3);
  EXPECT_EQ(s.completion_tokens, 1);
}

TEST(SseParser, MultiLineDataThenSingleLineReusesScratch) {
  SseParser p;
  auto ev = feed_all(p, {"data: a\ndata: b\n\ndata: c\n\ndata: d\ndata:\ndata: e\n\n"});
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].data, "a\nb");
  EXPECT_EQ(ev[1].data, "c");
  EXPECT_EQ(ev[2].data, "d\n\ne");
}

TEST(SseParser, ResetDropsPartialEvent) {
  SseParser p;
  feed_all(p, {"data: half"});
  EXPECT_GT(p.pending_bytes(), 0u);
  p.reset();
  EXPECT_EQ(p.pending_bytes(), 0u);
  auto ev = feed_all(p, {"data: new\n\n"});
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].data, "new");
}
