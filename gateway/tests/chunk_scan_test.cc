// The non-allocating chunk scan against a reference that parses every chunk fully with
// boost::json (what the gateway did before): same summary on many shapes, valid or not.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "chunk_scan.h"
#include "sse.h"

using namespace tidegate::gateway;
namespace json = boost::json;

namespace {

struct Ref {
  CompletionSummary s;
  bool usage_only = false;
  bool has_choices = false;
};

void ref_usage(const json::object& obj, CompletionSummary& s) {
  const auto* usage = obj.if_contains("usage");
  if (!usage || !usage->is_object()) return;
  const auto& u = usage->get_object();
  if (const auto* p = u.if_contains("prompt_tokens"); p && p->is_int64()) s.prompt_tokens = p->get_int64();
  if (const auto* c = u.if_contains("completion_tokens"); c && c->is_int64()) s.completion_tokens = c->get_int64();
}

const json::object* ref_choice(const json::object& obj, bool* has_choices) {
  *has_choices = false;
  const auto* choices = obj.if_contains("choices");
  if (!choices || !choices->is_array() || choices->get_array().empty()) return nullptr;
  *has_choices = true;
  for (const auto& c : choices->get_array()) {
    if (!c.is_object()) continue;
    const auto* idx = c.get_object().if_contains("index");
    if (!idx || (idx->is_int64() && idx->get_int64() == 0)) return &c.get_object();
  }
  return nullptr;
}

void ref_finish(const json::object& choice, CompletionSummary& s) {
  if (const auto* f = choice.if_contains("finish_reason"); f && f->is_string()) s.finish_reason = f->get_string();
}

// The previous implementation, kept as the oracle.
void ref_stream(std::string_view data, Ref& r) {
  json::error_code ec;
  auto v = json::parse(data, ec);
  if (ec || !v.is_object()) return;
  const auto& obj = v.get_object();
  ref_usage(obj, r.s);
  bool has = false;
  if (const auto* choice = ref_choice(obj, &has)) {
    if (const auto* delta = choice->if_contains("delta"); delta && delta->is_object()) {
      if (const auto* c = delta->get_object().if_contains("content"); c && c->is_string()) r.s.content.append(c->get_string());
    } else if (const auto* t = choice->if_contains("text"); t && t->is_string()) {
      r.s.content.append(t->get_string());
    }
    ref_finish(*choice, r.s);
  }
  const auto* usage = obj.if_contains("usage");
  r.has_choices = has;
  r.usage_only = !has && usage && usage->is_object();
}

void ref_body(std::string_view body, CompletionSummary& s) {
  json::error_code ec;
  auto v = json::parse(body, ec);
  if (ec || !v.is_object()) return;
  const auto& obj = v.get_object();
  ref_usage(obj, s);
  bool has = false;
  if (const auto* choice = ref_choice(obj, &has)) {
    if (const auto* m = choice->if_contains("message"); m && m->is_object()) {
      if (const auto* c = m->get_object().if_contains("content"); c && c->is_string()) s.content = c->get_string();
    } else if (const auto* t = choice->if_contains("text"); t && t->is_string()) {
      s.content = t->get_string();
    }
    ref_finish(*choice, s);
  }
  s.done = true;
}

const std::vector<std::string>& shapes() {
  static const std::vector<std::string> v = {
      R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"logprobs":null,"finish_reason":null}]})",
      R"({"choices":[{"delta":{"content":"lo"},"index":0,"finish_reason":"stop"}],"usage":null})",
      R"({"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}})",
      R"({"usage":{"completion_tokens":3,"prompt_tokens":11},"choices":[]})",
      R"({"choices":[{"index":1,"text":"no"},{"index":0,"text":"yes","finish_reason":"length"}]})",
      R"({"choices":[{"text":"no index"}]})",
      R"({"choices":[{"index":0.0,"text":"float index"},{"index":0,"text":"int index"}]})",
      R"({"choices":[{"index":"0","text":"string index"}]})",
      R"({"choices":[7,null,{"index":0,"delta":{"content":"after junk"}}]})",
      R"({"choices":[{"index":0,"delta":"not an object","text":"text used"}]})",
      R"({"choices":[{"index":0,"delta":{"content":null},"text":"ignored"}]})",
      R"({"choices":[{"index":0,"delta":{"content":"esc \"q\" \\ \/ \b\f\n\r\t \u00e9 \u4e2d \ud83d\ude00 end"}}]})",
      R"({"choi\u0063es":[{"index":0,"delta":{"content":"escaped key"}}]})",
      R"({"choices":[{"index":0,"delta":{"content":"nested","tool_calls":[{"id":"t","function":{"arguments":"{\"a\":[1,2,{\"b\":true}]}"}}]}}]})",
      R"({"choices":{"index":0},"usage":{"prompt_tokens":1.5,"completion_tokens":-2}})",
      R"({"usage":{"prompt_tokens":99999999999999999999,"completion_tokens":1e3}})",
      R"({"usage":[1,2]})",
      R"({"choices":[],"usage":{}})",
      R"(  { "choices" : [ { "index" : 0 , "delta" : { "content" : "spaced" } , "finish_reason" : "stop" } ] }  )",
      R"({"choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}})",
      R"({"choices":[{"index":0,"message":"bad","text":"fallback"}]})",
      R"({"a":true,"b":false,"c":null,"d":-0.5e-3,"e":[[],{}],"choices":[{"index":0,"delta":{"content":"x"}}]})",
      // Invalid: nothing may be taken from these.
      R"({"choices":[{"index":0,"delta":{"content":"unterminated})",
      R"({"choices":[{"index":0,"delta":{"content":"x"}}]} trailing)",
      R"({"choices":[{"index":0,"delta":{"content":"x"}},]})",
      R"({"choices":[{"index":0,"delta":{"content":"bad \x escape"}}]})",
      R"({"choices":[{"index":0,"delta":{"content":"lone \ud83d surrogate"}}]})",
      R"({"choices":[{"index":01,"delta":{"content":"leading zero"}}]})",
      R"({"usage":{"prompt_tokens":tru}})",
      R"({"choices":[{"index":0,"delta":{"content":"ctl)" "\x01" R"("}}]})",
      R"(["not","an","object"])",
      "not json",
      "",
      "{}",
  };
  return v;
}

void expect_body_reads_as_full_parse(std::string_view body) {
  CompletionSummary ref, got;
  ref_body(body, ref);
  summarize_response_body(body, got);
  EXPECT_EQ(got.content, ref.content);
  EXPECT_EQ(got.finish_reason, ref.finish_reason);
  EXPECT_EQ(got.prompt_tokens, ref.prompt_tokens);
  EXPECT_EQ(got.completion_tokens, ref.completion_tokens);
  EXPECT_EQ(got.done, ref.done);
}

}  // namespace

TEST(ChunkScan, StreamChunksMatchFullParse) {
  for (const auto& shape : shapes()) {
    SCOPED_TRACE(shape);
    Ref ref;
    ref.s.content = "prior ";
    ref.s.finish_reason = "prior";
    ref_stream(shape, ref);
    CompletionSummary got;
    got.content = "prior ";
    got.finish_reason = "prior";
    const auto kind = accumulate_stream_chunk(shape, got);
    EXPECT_EQ(got.content, ref.s.content);
    EXPECT_EQ(got.finish_reason, ref.s.finish_reason);
    EXPECT_EQ(got.prompt_tokens, ref.s.prompt_tokens);
    EXPECT_EQ(got.completion_tokens, ref.s.completion_tokens);
    EXPECT_EQ(kind.usage_only, ref.usage_only);
    EXPECT_EQ(kind.has_choices, ref.has_choices);
  }
}

TEST(ChunkScan, ResponseBodiesMatchFullParse) {
  for (const auto& shape : shapes()) {
    SCOPED_TRACE(shape);
    expect_body_reads_as_full_parse(shape);
  }
}

// Strings are skipped 16 bytes at a time: a quote, an escape or a control byte at every offset
// of a long string, across block edges, reads as the full parse reads it.
TEST(ChunkScan, StopBytesAtEveryOffsetOfLongStrings) {
  const std::string stops[] = {"\\\"", "\\n", "\\u00e9", "\\\\", "\x01", "\x1f", "\"", "\x7f", "\xc3\xa9"};
  for (const auto& stop : stops) {
    for (std::size_t at = 0; at <= 48; ++at) {
      std::string content(at, 'a');
      content += stop;
      content += std::string(40, 'b');
      const std::string body = R"({"choices":[{"index":0,"message":{"content":")" + content +
                               R"("},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":1}})";
      SCOPED_TRACE(body);
      expect_body_reads_as_full_parse(body);
    }
  }
}

TEST(ChunkScan, DecodesEscapesToUtf8) {
  ChunkFacts f;
  ASSERT_TRUE(scan_chunk(R"({"choices":[{"delta":{"content":"\u00e9\ud83d\ude00\n"}}]})", f));
  ASSERT_TRUE(f.choice);
  std::string out;
  f.choice->delta_content.append_to(out);
  EXPECT_EQ(out, "\xC3\xA9\xF0\x9F\x98\x80\n");
}

TEST(ChunkScan, DepthLimitRejectsDeepNesting) {
  std::string deep = R"({"x":)";
  for (int i = 0; i < 40; ++i) deep += "[";
  for (int i = 0; i < 40; ++i) deep += "]";
  deep += "}";
  ChunkFacts f;
  EXPECT_FALSE(scan_chunk(deep, f));
  std::string ok = R"({"x":[[[]]],"usage":{"prompt_tokens":4}})";
  ASSERT_TRUE(scan_chunk(ok, f));
  EXPECT_EQ(f.prompt_tokens, 4);
}

// A stream of many chunks fed in odd pieces: the same totals as the reference.
TEST(ChunkScan, WholeStreamThroughParser) {
  std::string text;
  Ref ref;
  for (int i = 0; i < 50; ++i) {
    const std::string chunk = R"({"choices":[{"index":0,"delta":{"content":"t)" + std::to_string(i) + R"( "}}]})";
    text += "data: " + chunk + "\n\n";
    ref_stream(chunk, ref);
  }
  const std::string usage = R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":50}})";
  text += "data: " + usage + "\r\n\r\ndata: [DONE]\n\n";
  ref_stream(usage, ref);
  SseParser p;
  CompletionSummary s;
  int usage_only = 0;
  for (std::size_t at = 0; at < text.size(); at += 37) {
    p.feed(std::string_view(text).substr(at, 37));
    SseEvent ev;
    while (p.next(ev)) usage_only += accumulate_stream_chunk(ev.data, s).usage_only;
  }
  EXPECT_EQ(s.content, ref.s.content);
  EXPECT_EQ(s.prompt_tokens, 5);
  EXPECT_EQ(s.completion_tokens, 50);
  EXPECT_EQ(usage_only, 1);
  EXPECT_TRUE(s.done);
}

TEST(ChunkScan, CachedPromptTokensFromUsageDetailsOrLlamaCppTimings) {
  ChunkFacts f;
  ASSERT_TRUE(scan_chunk(R"({"usage":{"prompt_tokens":900,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":768}}})", f));
  EXPECT_EQ(f.cached_tokens, 768);
  EXPECT_EQ(f.prompt_tokens, 900);
  ASSERT_TRUE(scan_chunk(R"({"choices":[],"timings":{"prompt_n":12,"cache_n":500},"usage":{"prompt_tokens":512}})", f));
  EXPECT_EQ(f.cached_tokens, 500);  // llama.cpp's own block
  ASSERT_TRUE(scan_chunk(R"({"usage":{"prompt_tokens":9,"prompt_tokens_details":null}})", f));
  EXPECT_FALSE(f.cached_tokens);
  // usage details win over timings whichever comes first; a repeated usage key starts afresh.
  ASSERT_TRUE(scan_chunk(R"({"usage":{"prompt_tokens_details":{"cached_tokens":7}},"timings":{"cache_n":3}})", f));
  EXPECT_EQ(f.cached_tokens, 7);
  ASSERT_TRUE(scan_chunk(R"({"usage":{"prompt_tokens_details":{"cached_tokens":7}},"usage":{"prompt_tokens":1}})", f));
  EXPECT_FALSE(f.cached_tokens);
  EXPECT_FALSE(scan_chunk(R"({"usage":{"prompt_tokens_details":{"cached_tokens":}}})", f));
  CompletionSummary s;
  summarize_response_body(R"({"choices":[],"usage":{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":8}}})", s);
  EXPECT_EQ(s.cached_prompt_tokens, 8);
}
