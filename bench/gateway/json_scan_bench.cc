// What the gateway pays to read a body: its validating scans (scan_request, and scan_chunk
// through summarize_response_body) next to boost::json::parse of the same bytes, which is
// what they replaced. Bodies are the shapes the proxy benchmark and a real vLLM server send.
#include <benchmark/benchmark.h>

#include <boost/json.hpp>
#include <string>

#include "request_scan.h"
#include "sse.h"

namespace {

using tidegate::gateway::CompletionSummary;
using tidegate::gateway::RequestFacts;

// bench/proxy/chat.lua's request and the simulator's answer to it.
const std::string kRequest =
    R"({"model":"sim","messages":[{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":8})";
const std::string kResponse =
    R"({"id":"chatcmpl-sim-1","object":"chat.completion","created":1796076331,"model":"sim","choices":[{"index":0,)"
    R"("message":{"role":"assistant","content":" it will when but cost state way not"},"logprobs":null,)"
    R"("finish_reason":"length"}],"usage":{"prompt_tokens":8,"completion_tokens":8,"total_tokens":16}})";

// A multi-turn chat request with a system prompt, about 2 KiB, as an agent framework sends.
std::string long_request() {
  std::string turns;
  for (int i = 0; i < 6; ++i) {
    turns += R"({"role":"user","content":"Question )" + std::to_string(i) +
             R"(: how does continuous batching change the cost of a long prompt compared with a short one?"},)";
    turns += R"({"role":"assistant","content":"It mostly changes prefill: the prompt's tokens are processed together, \"chunked\" when long."},)";
  }
  return R"({"model":"llama-3.1-8b-instruct","messages":[{"role":"system","content":"You are a helpful assistant."},)" +
         turns + R"({"role":"user","content":"Thanks!"}],"temperature":0.7,"max_tokens":256,"stream":false,"user":"u-42"})";
}

// A vLLM non-stream answer of about 1 KiB of text.
std::string long_response() {
  std::string text;
  while (text.size() < 1000) text += "Continuous batching admits new sequences at every decode step. ";
  return R"({"id":"chatcmpl-9f1c","object":"chat.completion","created":1796076331,"model":"llama-3.1-8b-instruct",)"
         R"("choices":[{"index":0,"message":{"role":"assistant","content":")" + text +
         R"(","tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],)"
         R"("usage":{"prompt_tokens":812,"total_tokens":1046,"completion_tokens":234,"prompt_tokens_details":null},)"
         R"("prompt_logprobs":null})";
}

void ScanRequest(benchmark::State& state, const std::string& body) {
  RequestFacts facts;
  for (auto _ : state) {
    const bool ok = tidegate::gateway::scan_request(body, facts);
    benchmark::DoNotOptimize(ok);
    benchmark::DoNotOptimize(facts);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(body.size()));
}

void SummarizeResponse(benchmark::State& state, const std::string& body) {
  CompletionSummary summary;
  for (auto _ : state) {
    tidegate::gateway::summarize_response_body(body, summary);
    benchmark::DoNotOptimize(summary);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(body.size()));
}

// The peer: a DOM parse into an arena on the stack, as the gateway did before the scans.
void BoostJsonParse(benchmark::State& state, const std::string& body) {
  for (auto _ : state) {
    unsigned char buffer[16384];
    boost::json::monotonic_resource arena(buffer, sizeof buffer);
    boost::system::error_code ec;
    auto v = boost::json::parse(body, ec, &arena);
    benchmark::DoNotOptimize(v);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(body.size()));
}

const std::string kLongRequest = long_request();
const std::string kLongResponse = long_response();

BENCHMARK_CAPTURE(ScanRequest, bench_request, kRequest);
BENCHMARK_CAPTURE(BoostJsonParse, bench_request, kRequest);
BENCHMARK_CAPTURE(ScanRequest, chat_2k, kLongRequest);
BENCHMARK_CAPTURE(BoostJsonParse, chat_2k, kLongRequest);
BENCHMARK_CAPTURE(SummarizeResponse, sim_answer, kResponse);
BENCHMARK_CAPTURE(BoostJsonParse, sim_answer, kResponse);
BENCHMARK_CAPTURE(SummarizeResponse, vllm_answer_1k, kLongResponse);
BENCHMARK_CAPTURE(BoostJsonParse, vllm_answer_1k, kLongResponse);

}  // namespace

BENCHMARK_MAIN();
