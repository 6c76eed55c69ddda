#include "config.h"

#include <stdexcept>
#include <string_view>

namespace tidegate::sim {
namespace {

double to_double(std::string_view flag, const std::string& v, double min) {
  std::size_t used = 0;
  double d = 0;
  try {
    d = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || !(d >= min)) throw std::invalid_argument(std::string(flag) + ": expected a number >= " + std::to_string(min) + ", got '" + v + "'");
  return d;
}

std::int64_t to_int(std::string_view flag, const std::string& v, std::int64_t min) {
  std::size_t used = 0;
  long long i = 0;
  try {
    i = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || i < min) throw std::invalid_argument(std::string(flag) + ": expected an integer >= " + std::to_string(min) + ", got '" + v + "'");
  return i;
}

}  // namespace

std::string usage_text() {
  return R"(usage: tidegate-sim [flags]
  --host ADDR             listen address (default 127.0.0.1)
  --port N                listen port; 0 picks one (default 8000). First stdout line: "listening on HOST:PORT"
  --model NAME            served model name (default sim)
  --ttft-ms X --tpot-ms Y fixed-latency mode: exact time to first token / per output token
  --max-batch N           max concurrent sequences (default 256)
  --prefill-tps X         prompt tokens per second (default 10000)
  --decode-base-ms X      decode step time at batch 1 (default 10)
  --decode-per-seq-ms X   extra decode step time per running sequence (default 0.03)
  --kv-tokens N           KV cache capacity in tokens (default 400000)
  --max-num-batched-tokens N  per-step token budget, vLLM's flag; 0 = whole prompts (default 2048)
  --block-size N          prefix-cache block size in tokens (default 16)
  --no-prefix-caching     turn automatic prefix caching off
  --startup-ms X          simulated model load; /health is 503 until done (default 0)
  --wake-ms X             sleep mode: POST /wake_up to serving again (default 2000)
  --echo                  replies start with the last user message verbatim
  --seed N                seeds reply lengths, words and fault injection (default 1)
  --fail-rate F           fraction of POSTs answered 500 (default 0)
  --die-after N           exit abruptly once the Nth POST has started (mid-stream if streaming)
  --max-tokens-default N  replies without max_tokens get 1..N tokens (default 64)
  --embedding-dim N       embedding width (default 384)
  --threads N             I/O threads (default 2)
)";
}

std::shared_ptr<const ServerConfig> parse_flags(int argc, char** argv) {
  auto cfg = std::make_shared<ServerConfig>();
  bool ttft_set = false, tpot_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") return nullptr;
    if (flag == "--echo") {
      cfg->echo = true;
      continue;
    }
    if (flag == "--no-prefix-caching") {
      cfg->timing.prefix_caching = false;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + ": missing value");
    const std::string v = argv[++i];
    if (flag == "--host") cfg->host = v;
    else if (flag == "--port") cfg->port = static_cast<int>(to_int(flag, v, 0));
    else if (flag == "--model") cfg->model = v;
    else if (flag == "--ttft-ms") { cfg->timing.ttft_s = to_double(flag, v, 0) / 1000; ttft_set = true; }
    else if (flag == "--tpot-ms") { cfg->timing.tpot_s = to_double(flag, v, 0) / 1000; tpot_set = true; }
    else if (flag == "--max-batch") cfg->timing.max_batch = static_cast<int>(to_int(flag, v, 1));
    else if (flag == "--prefill-tps") cfg->timing.prefill_tokens_per_s = to_double(flag, v, 1);
    else if (flag == "--decode-base-ms") cfg->timing.decode_base_s = to_double(flag, v, 0) / 1000;
    else if (flag == "--decode-per-seq-ms") cfg->timing.decode_per_seq_s = to_double(flag, v, 0) / 1000;
    else if (flag == "--kv-tokens") cfg->timing.kv_capacity_tokens = to_int(flag, v, 1);
    else if (flag == "--max-num-batched-tokens") cfg->timing.max_num_batched_tokens = to_int(flag, v, 0);
    else if (flag == "--block-size") cfg->timing.prefix_block_tokens = static_cast<std::int32_t>(to_int(flag, v, 1));
    else if (flag == "--startup-ms") cfg->timing.startup_s = to_double(flag, v, 0) / 1000;
    else if (flag == "--wake-ms") cfg->wake_s = to_double(flag, v, 0) / 1000;
    else if (flag == "--seed") cfg->seed = static_cast<std::uint64_t>(to_int(flag, v, 0));
    else if (flag == "--fail-rate") cfg->fail_rate = to_double(flag, v, 0);
    else if (flag == "--die-after") cfg->die_after = to_int(flag, v, 0);
    else if (flag == "--max-tokens-default") cfg->max_tokens_default = static_cast<std::int32_t>(to_int(flag, v, 1));
    else if (flag == "--embedding-dim") cfg->embedding_dim = static_cast<int>(to_int(flag, v, 1));
    else if (flag == "--threads") cfg->threads = static_cast<int>(to_int(flag, v, 1));
    else throw std::invalid_argument("unknown flag " + flag);
  }
  if (cfg->port > 65535) throw std::invalid_argument("--port: must be <= 65535");
  if (cfg->fail_rate > 1) throw std::invalid_argument("--fail-rate: must be in [0, 1]");
  // Either latency flag selects fixed mode; the other defaults to 0.
  cfg->timing.fixed_latency = ttft_set || tpot_set;
  return cfg;
}

}  // namespace tidegate::sim
