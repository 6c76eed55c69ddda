#include <gtest/gtest.h>

#include "tidegate/replay/trace.h"

namespace tidegate::replay {
namespace {

ParseOptions opts(BadRowPolicy bad = BadRowPolicy::kSkip, UnsortedPolicy unsorted = UnsortedPolicy::kSort) {
  ParseOptions o;
  o.on_bad_row = bad;
  o.on_unsorted = unsorted;
  return o;
}

TEST(AzureTimestamp, SevenFractionalDigits) {
  const double a = parse_azure_timestamp("2023-11-16 18:15:46.6805900");
  const double b = parse_azure_timestamp("2023-11-16 18:15:46");
  EXPECT_NEAR(a - b, 0.68059, 1e-6);
  // 2023-11-16 00:00:00 UTC is 1700092800 s since the epoch.
  EXPECT_DOUBLE_EQ(parse_azure_timestamp("2023-11-16 00:00:00"), 1700092800.0);
  EXPECT_DOUBLE_EQ(parse_azure_timestamp("2024-03-01 00:00:00") - parse_azure_timestamp("2024-02-28 00:00:00"),
                   2 * 86400.0);  // leap year
  EXPECT_THROW(parse_azure_timestamp("2023-11-16"), std::invalid_argument);
  EXPECT_THROW(parse_azure_timestamp("2023-13-16 00:00:00"), std::invalid_argument);
  EXPECT_THROW(parse_azure_timestamp("2023-11-16 00:00:00.12x"), std::invalid_argument);
}

TEST(TraceParse, Azure) {
  const std::string text =
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "2023-11-16 18:15:46.6805900,374,44\n"
      "2023-11-16 18:15:50.9951690,396,109\r\n"
      "2023-11-16 18:15:51.2224670,879,0\n";
  const auto t = parse_trace_text(text, "a.csv", opts());
  EXPECT_EQ(t.format, TraceFormat::kAzure);
  ASSERT_EQ(t.requests.size(), 3u);
  EXPECT_DOUBLE_EQ(t.requests[0].arrival_s, 0);
  EXPECT_NEAR(t.requests[1].arrival_s, 4.314579, 1e-6);
  EXPECT_EQ(t.requests[1].prompt_tokens, 396);
  EXPECT_EQ(t.requests[1].output_tokens, 109);
  EXPECT_EQ(t.requests[2].output_tokens, 1);  // zero output still yields one token
  EXPECT_EQ(t.zero_output_rows, 1u);
}

TEST(TraceParse, MooncakeAndLoadFactor) {
  const std::string text =
      "{\"timestamp\": 1000, \"input_length\": 6955, \"output_length\": 52, \"hash_ids\": [1,2,3]}\n"
      "{\"timestamp\": 3000, \"input_length\": 100, \"output_length\": 7}\n\n";
  auto o = opts();
  o.load_factor = 2;
  const auto t = parse_trace_text(text, "m.jsonl", o);
  EXPECT_EQ(t.format, TraceFormat::kMooncake);
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_DOUBLE_EQ(t.requests[1].arrival_s, 1.0);  // 2 s apart, twice as fast
  EXPECT_EQ(t.requests[0].prompt_tokens, 6955);
  EXPECT_EQ(t.requests[1].output_tokens, 7);
}

TEST(TraceParse, BurstGptColumnsByNameFailuresKept) {
  // BurstGPT's release order, then an export's (Log Type first); seconds, whole or not.
  const std::string text =
      "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
      "5,ChatGPT,472,18,490,Conversation log\n"
      "45,GPT-4,1087,0,1087,API log\n"
      "118.5,ChatGPT,417,276,693,Conversation log\n";
  const auto t = parse_trace_text(text, "b.csv", opts());
  EXPECT_EQ(t.format, TraceFormat::kBurstGpt);
  ASSERT_EQ(t.requests.size(), 3u);
  EXPECT_DOUBLE_EQ(t.requests[1].arrival_s, 40);
  EXPECT_DOUBLE_EQ(t.requests[2].arrival_s, 113.5);
  EXPECT_EQ(t.requests[1].prompt_tokens, 1087);
  EXPECT_EQ(t.requests[1].output_tokens, 1);  // a failed request (0 response tokens) still arrived
  EXPECT_EQ(t.zero_output_rows, 1u);
  EXPECT_EQ(t.requests[2].output_tokens, 276);
  EXPECT_EQ(t.block_tokens, 0);

  const auto reordered = parse_trace_text(
      "Log Type,Timestamp,Request tokens,Response tokens\nx,10,3,4\nx,ten,3,4\nx,12,3\nx,11,-2,4\nx,13,5,6\n",
      "e.csv", opts());
  ASSERT_EQ(reordered.requests.size(), 2u);
  EXPECT_DOUBLE_EQ(reordered.requests[1].arrival_s, 3);
  ASSERT_EQ(reordered.bad_row_count, 3u);
  EXPECT_EQ(reordered.bad_rows[0].line, 3u);
  EXPECT_NE(reordered.bad_rows[0].reason.find("Timestamp"), std::string::npos);
  EXPECT_THROW(parse_trace_text("Timestamp,Request tokens\n1,2\n", "h.csv", [] {
                 auto o = opts();
                 o.format = TraceFormat::kBurstGpt;
                 return o;
               }()),
               TraceError);
}

TEST(TraceParse, ModelFilterOnlyWhereThereIsAModelColumn) {
  const std::string text =
      "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
      "0,ChatGPT,10,1,11,Conversation log\n"
      "7,GPT-4,20,2,22,Conversation log\n"
      "9,ChatGPT,30,3,33,Conversation log\n"
      "12,GPT-4,40,4,44,API log\n";
  auto o = opts();
  o.model = "GPT-4";
  const auto t = parse_trace_text(text, "b.csv", o);
  ASSERT_EQ(t.requests.size(), 2u);
  EXPECT_EQ(t.other_model_rows, 2u);
  EXPECT_DOUBLE_EQ(t.requests[0].arrival_s, 0);  // rebased to the model's first request
  EXPECT_DOUBLE_EQ(t.requests[1].arrival_s, 5);
  EXPECT_EQ(t.requests[1].prompt_tokens, 40);
  o.model = "gpt-4";  // names are exact
  try {
    parse_trace_text(text, "b.csv", o);
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("no requests of model 'gpt-4'"), std::string::npos) << e.what();
  }
  o.model = "GPT-4";
  for (const char* other : {"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,1\n",
                            "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n",
                            "Timestamp,Request tokens,Response tokens\n0,1,1\n"}) {
    try {
      parse_trace_text(other, "o", o);
      ADD_FAILURE() << other;
    } catch (const TraceError& e) {
      EXPECT_NE(std::string(e.what()).find("model 'GPT-4'"), std::string::npos) << e.what();
    }
  }
}

TEST(TraceParse, WindowOfTheTracesOwnTimeBeforeTheLoadFactor) {
  std::string text = "{\"timestamp\": 1000, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [1, 2]}\n";
  for (int s = 2; s <= 10; ++s)
    text += "{\"timestamp\": " + std::to_string(s * 1000) + ", \"input_length\": " + std::to_string(s) +
            ", \"output_length\": 1}\n";
  auto o = opts();
  o.window_from_s = 2.5;  // trace seconds 2.5 .. 6 after the first request at 1 s: 4, 5, 6 s
  o.window_to_s = 6;
  o.load_factor = 2;
  const auto t = parse_trace_text(text, "m.jsonl", o);
  ASSERT_EQ(t.requests.size(), 3u);
  EXPECT_EQ(t.outside_window_rows, 7u);
  EXPECT_EQ(t.requests[0].prompt_tokens, 4);
  EXPECT_DOUBLE_EQ(t.requests[0].arrival_s, 0);
  EXPECT_DOUBLE_EQ(t.requests[2].arrival_s, 1.0);  // 2 s of the trace at twice the rate
  // Prefix counters are of the requests replayed: the one with ids is outside.
  EXPECT_EQ(t.requests_with_blocks, 0u);
  EXPECT_EQ(t.block_tokens, 0);
  o.window_from_s = 20, o.window_to_s = 30;
  try {
    parse_trace_text(text, "m.jsonl", o);
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("no requests in the window [20, 30) s"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("span 9 s"), std::string::npos) << e.what();
  }
  o.window_from_s = 5, o.window_to_s = 5;
  EXPECT_THROW(parse_trace_text(text, "m.jsonl", o), std::invalid_argument);
  o.window_from_s = -1, o.window_to_s = 5;
  EXPECT_THROW(parse_trace_text(text, "m.jsonl", o), std::invalid_argument);
}

TEST(TraceParse, ByteOrderMarkBeforeTheHeader) {
  const auto t = parse_trace_text("\xEF\xBB\xBFTIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,5,6\n",
                                  "bom.csv", opts());
  EXPECT_EQ(t.format, TraceFormat::kAzure);
  ASSERT_EQ(t.requests.size(), 1u);
  EXPECT_EQ(t.requests[0].prompt_tokens, 5);
}

TEST(TraceParse, DetectsFormatOrRefuses) {
  EXPECT_EQ(detect_format("Timestamp,Model,Request tokens,Response tokens\n"), TraceFormat::kBurstGpt);
  EXPECT_EQ(trace_format_from_string("burstgpt"), TraceFormat::kBurstGpt);
  EXPECT_EQ(to_string(TraceFormat::kBurstGpt), "burstgpt");
  EXPECT_EQ(detect_format("\n{\"timestamp\":0}"), TraceFormat::kMooncake);
  EXPECT_EQ(detect_format("TIMESTAMP,ContextTokens,GeneratedTokens\n"), TraceFormat::kAzure);
  EXPECT_EQ(detect_format("time,a,b\n"), TraceFormat::kAuto);
  EXPECT_THROW(parse_trace_text("time,a,b\n1,2,3\n", "x", opts()), TraceError);
}

TEST(TraceParse, MalformedRowsReportLineNumbers) {
  const std::string text =
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "2023-11-16 18:15:46.0,10,5\n"
      "2023-11-16 18:15:47.0,ten,5\n"
      "2023-11-16 18:15:48.0,10\n"
      "garbage,1,1\n"
      "2023-11-16 18:15:49.0,-3,5\n"
      "2023-11-16 18:15:50.0,10,6\n";
  const auto t = parse_trace_text(text, "bad.csv", opts());
  EXPECT_EQ(t.requests.size(), 2u);
  ASSERT_EQ(t.bad_row_count, 4u);
  EXPECT_EQ(t.bad_rows[0].line, 3u);
  EXPECT_NE(t.bad_rows[0].reason.find("ContextTokens"), std::string::npos);
  EXPECT_EQ(t.bad_rows[1].line, 4u);
  EXPECT_EQ(t.bad_rows[2].line, 5u);
  EXPECT_EQ(t.bad_rows[3].line, 6u);
  try {
    parse_trace_text(text, "bad.csv", opts(BadRowPolicy::kFail));
    FAIL() << "expected a TraceError";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.line(), 3u);
    EXPECT_NE(std::string(e.what()).find("bad.csv:3"), std::string::npos) << e.what();
  }
  const std::string jsonl = "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n{oops\n"
                            "{\"timestamp\": 5, \"input_length\": \"x\", \"output_length\": 1}\n";
  const auto m = parse_trace_text(jsonl, "m.jsonl", opts());
  ASSERT_EQ(m.bad_row_count, 2u);
  EXPECT_EQ(m.bad_rows[0].line, 2u);
  EXPECT_EQ(m.bad_rows[1].line, 3u);
}

TEST(TraceParse, UnsortedIsSortedWithCountOrRejected) {
  const std::string text =
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "2023-11-16 18:15:50.0,1,1\n"
      "2023-11-16 18:15:46.0,2,2\n"
      "2023-11-16 18:15:48.0,3,3\n";
  const auto t = parse_trace_text(text, "u.csv", opts());
  ASSERT_EQ(t.requests.size(), 3u);
  EXPECT_EQ(t.out_of_order_rows, 1u);
  EXPECT_EQ(t.first_out_of_order_line, 3u);
  EXPECT_EQ(t.requests[0].prompt_tokens, 2);
  EXPECT_EQ(t.requests[1].prompt_tokens, 3);
  EXPECT_DOUBLE_EQ(t.requests[2].arrival_s, 4.0);
  try {
    parse_trace_text(text, "u.csv", opts(BadRowPolicy::kSkip, UnsortedPolicy::kFail));
    FAIL() << "expected a TraceError";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.line(), 3u);
  }
}

TEST(TraceParse, EmptyTracesAreErrors) {
  EXPECT_THROW(parse_trace_text("", "e.csv", opts()), TraceError);
  EXPECT_THROW(parse_trace_text("TIMESTAMP,ContextTokens,GeneratedTokens\n", "e.csv", opts()), TraceError);
  try {
    parse_trace_text("TIMESTAMP,ContextTokens,GeneratedTokens\nx,y,z\n", "e.csv", opts());
    FAIL();
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("no valid requests"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_trace_file("/nonexistent/trace.csv", opts()), TraceError);
  auto o = opts();
  o.load_factor = 0;
  EXPECT_THROW(parse_trace_text("{\"timestamp\":0,\"input_length\":1,\"output_length\":1}", "m", o),
               std::invalid_argument);
}

}  // namespace
}  // namespace tidegate::replay
