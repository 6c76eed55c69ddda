#include <gtest/gtest.h>

#include "tidegate/cache/semantic_cache.h"

using namespace tidegate::cache;
namespace json = boost::json;

namespace {

CachedAnswer answer() {
  CachedAnswer a;
  a.content = "The capital of France is Paris.\nIt has  the Eiffel Tower, the Louvre and more.";
  a.finish_reason = "stop";
  a.prompt_tokens = 12;
  a.completion_tokens = 20;
  return a;
}

std::vector<std::string> data_lines(const std::string& sse) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < sse.size()) {
    const auto end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "event not terminated by a blank line";
    if (end == std::string::npos) break;
    const auto ev = sse.substr(pos, end - pos);
    EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    out.push_back(ev.substr(6));
    pos = end + 2;
  }
  return out;
}

}  // namespace

TEST(CacheRender, ChatJson) {
  const auto body = json::parse(render_hit_json(RequestView::Endpoint::kChat, "llama", answer())).as_object();
  EXPECT_EQ(body.at("object"), "chat.completion");
  EXPECT_EQ(body.at("id").as_string().subview().substr(0, 12), "chatcmpl-tg-");
  EXPECT_EQ(body.at("model"), "llama");
  EXPECT_GT(body.at("created").as_int64(), 1700000000);
  const auto& choice = body.at("choices").as_array().at(0).as_object();
  EXPECT_EQ(choice.at("message").at("role"), "assistant");
  EXPECT_EQ(choice.at("message").at("content").as_string(), answer().content);
  EXPECT_EQ(choice.at("finish_reason"), "stop");
  EXPECT_EQ(body.at("usage").at("total_tokens").as_int64(), 32);
  const auto again = json::parse(render_hit_json(RequestView::Endpoint::kChat, "llama", answer())).as_object();
  EXPECT_NE(body.at("id"), again.at("id"));
}

TEST(CacheRender, CompletionJson) {
  auto a = answer();
  a.finish_reason = "length";
  const auto body = json::parse(render_hit_json(RequestView::Endpoint::kCompletions, "m", a)).as_object();
  EXPECT_EQ(body.at("object"), "text_completion");
  EXPECT_EQ(body.at("id").as_string().subview().substr(0, 8), "cmpl-tg-");
  EXPECT_EQ(body.at("choices").at(0).at("text").as_string(), a.content);
  EXPECT_EQ(body.at("choices").at(0).at("finish_reason"), "length");
}

TEST(CacheRender, ChatSseWithUsage) {
  const auto lines = data_lines(render_hit_sse(RequestView::Endpoint::kChat, "llama", answer(), true));
  ASSERT_GE(lines.size(), 5u);
  EXPECT_EQ(lines.back(), "[DONE]");
  std::string content;
  std::string id;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    const auto c = json::parse(lines[i]).as_object();
    if (id.empty()) id = c.at("id").as_string().c_str();
    EXPECT_EQ(c.at("id").as_string(), id);  // one id for the whole stream
    EXPECT_EQ(c.at("object"), "chat.completion.chunk");
    const auto& choices = c.at("choices").as_array();
    if (i == 0) {
      EXPECT_EQ(choices.at(0).at("delta").at("role"), "assistant");
    }
    if (i + 2 == lines.size()) {  // usage chunk
      EXPECT_TRUE(choices.empty());
      EXPECT_EQ(c.at("usage").at("completion_tokens").as_int64(), 20);
      continue;
    }
    EXPECT_TRUE(c.at("usage").is_null());
    const auto& delta = choices.at(0).at("delta").as_object();
    if (const auto* t = delta.if_contains("content")) content += t->as_string().c_str();
    if (i + 3 == lines.size())
      EXPECT_EQ(choices.at(0).at("finish_reason"), "stop");
    else
      EXPECT_TRUE(choices.at(0).at("finish_reason").is_null());
  }
  EXPECT_EQ(content, answer().content);
  EXPECT_GE(lines.size(), 6u);  // content is split in several pieces
}

TEST(CacheRender, UsageExtraJoinsOnlyTheUsageChunk) {
  const json::object extra{{"tidegate_cost_usd", 0.25}};
  const auto lines = data_lines(render_hit_sse(RequestView::Endpoint::kChat, "llama", answer(), true, &extra));
  ASSERT_GE(lines.size(), 3u);
  const auto usage_chunk = json::parse(lines[lines.size() - 2]).as_object();
  EXPECT_EQ(usage_chunk.at("tidegate_cost_usd").as_double(), 0.25);
  EXPECT_EQ(usage_chunk.at("usage").at("completion_tokens").as_int64(), 20);
  for (std::size_t i = 0; i + 2 < lines.size(); ++i)
    EXPECT_FALSE(json::parse(lines[i]).as_object().contains("tidegate_cost_usd")) << lines[i];
}

TEST(CacheRender, CompletionSseWithoutUsage) {
  const auto lines = data_lines(render_hit_sse(RequestView::Endpoint::kCompletions, "m", answer(), false));
  EXPECT_EQ(lines.back(), "[DONE]");
  std::string text;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    const auto c = json::parse(lines[i]).as_object();
    EXPECT_EQ(c.at("object"), "text_completion");
    EXPECT_FALSE(c.contains("usage"));
    text += c.at("choices").at(0).at("text").as_string().c_str();
  }
  EXPECT_EQ(text, answer().content);
  EXPECT_EQ(json::parse(lines[lines.size() - 2]).at("choices").at(0).at("finish_reason"), "stop");
}
