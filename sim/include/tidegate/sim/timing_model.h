#pragma once
// Timing model of a continuous-batching inference server (vLLM-like), in explicit virtual time.
//
// Pure: no clocks, no threads, no I/O. The caller owns time: it submits requests at time t and
// calls advance(t) to learn what happened up to t. The same code runs in real time inside
// tidegate-sim (t = seconds since start) and in virtual time inside the trace replayer, where an
// hour of traffic must replay in seconds; hence per-token events are optional and a decode step
// costs O(log n) per finishing sequence plus O(prefilling sequences), not O(batch), when they
// are off.
//
// What it models, step by step (sim/README.md has the derivations of every default):
//   * chunked prefill: each step has a token budget (vLLM's max_num_batched_tokens) shared by
//     one token per decoding sequence and the prompt chunks of prefilling ones, FCFS;
//   * automatic prefix caching: prompt blocks, identified by the caller's chained hashes, stay
//     in the replica's KV cache after their request ends (LRU, evicted only when KV is needed),
//     and a request whose leading blocks are cached skips prefilling them;
//   * step time: a memory-bound decode part (weights once, plus every decoding sequence's KV
//     reads) and a compute-bound prefill part whose cost per token grows with the context the
//     token attends to.
//
// Copyable (a copy is an independent model in the same state: the replay's offline search
// forks fleets). Not thread-safe: one owner (or a mutex around it).
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

namespace tidegate::sim {

using RequestId = std::uint64_t;

struct TimingParams {
  // Fixed-latency mode: every admitted request gets exactly ttft_s to its first token and tpot_s
  // between tokens, whatever the load; only max_batch still applies (extra requests wait).
  bool fixed_latency = false;
  double ttft_s = 0.0;
  double tpot_s = 0.0;

  // Continuous batching. Defaults: Llama-3.1-8B BF16 on one A100-80GB SXM under vLLM V1; where
  // each number comes from is in sim/README.md.
  int max_batch = 256;                     // vLLM --max-num-seqs default
  // Per-step token budget, vLLM's --max-num-batched-tokens: its default for the OpenAI server
  // on an A100 (and any GPU under 70 GiB) is 2048; on H100/H200-class GPUs 8192. 0 = no
  // budget: every admitted prompt is prefilled whole in one step (vLLM V0 without chunking).
  std::int64_t max_num_batched_tokens = 2048;
  double prefill_tokens_per_s = 10000.0;   // prompt tokens per second of step time (~50% MFU)
  // Context length at which a prompt token's attention FLOPs equal its linear-layer FLOPs
  // (2 x params / (4 x layers x d_model) = 2 x 8.03e9 / (4 x 32 x 4096)); a chunk's tokens
  // cost (1 + mean context / this) times the linear rate. 0 = attention is free.
  double prefill_attention_context_tokens = 30600;
  double decode_base_s = 0.010;            // decode step at batch 1: weights streamed once
  double decode_per_seq_s = 0.00003;       // per decoding sequence: sampling, non-attention work
  // Per token of context of every decoding sequence, per step: its KV is read once
  // (128 KiB per token / ~2 TB/s effective).
  double decode_per_kv_token_s = 6.4e-8;
  std::int64_t kv_capacity_tokens = 400000;  // KV slots: (72 - 16 - 2) GiB / 128 KiB per token
  double startup_s = 0.0;                 // model load time before the first step can run

  // Automatic prefix caching (vLLM V1 default on). Block hashes come with submit(); a request
  // without them is never a hit. prefix_block_tokens is the size of the blocks they describe
  // (vLLM's block size 16; Mooncake traces describe 512-token blocks).
  bool prefix_caching = true;
  std::int32_t prefix_block_tokens = 16;

  // When false, advance() reports only first-token, finished and rejected events: what a replay
  // over millions of tokens needs. The HTTP simulator turns it on to stream token by token.
  bool emit_token_events = true;
};

enum class EventKind : std::uint8_t {
  kFirstToken,  // prefill done, token 1 emitted (tokens == 1)
  kToken,       // token `tokens` (>= 2) emitted
  kFinished,    // last token emitted; always right after that token's event, same t
  kRejected,    // prompt alone exceeds the KV capacity; never admitted (reported at submit time)
};

struct Event {
  EventKind kind;
  RequestId id;
  double t;            // virtual time of the event, seconds
  std::int32_t tokens; // output tokens emitted so far by this request
  std::int64_t cached_tokens = 0;  // kFirstToken: prompt tokens the prefix cache held (not prefilled)
};

struct Gauges {
  int running = 0;                  // admitted sequences (prefilling or decoding)
  int waiting = 0;                  // submitted, not yet admitted
  int decoding = 0;                 // running sequences past their first token
  std::int64_t kv_used_tokens = 0;  // KV held by running sequences (shared prefix blocks once)
  double kv_usage = 0.0;            // kv_used_tokens / kv_capacity_tokens, in [0, 1]
  // Prompt tokens still to prefill: waiting requests' whole prompts (before any cache lookup)
  // plus what running ones have left.
  std::int64_t prefill_backlog_tokens = 0;
};

// Cumulative, in tokens, as vLLM counts them (vllm:prefix_cache_queries_total / _hits_total).
struct PrefixCacheStats {
  std::int64_t queries_tokens = 0;  // prompt tokens of admitted requests
  std::int64_t hits_tokens = 0;     // of those, found in the cache (not prefilled)
  std::int64_t resident_tokens = 0; // blocks in the cache now, referenced or not
  std::int64_t evicted_tokens = 0;  // blocks evicted to make room
};

class TimingModel final {
 public:
  // `t0` is the virtual time at which the server process starts (loading begins).
  explicit TimingModel(const TimingParams& params, double t0 = 0.0);
  ~TimingModel();
  TimingModel(const TimingModel& other);
  TimingModel& operator=(const TimingModel&) = delete;

  // Queues a request arriving at t (t must not go backwards relative to earlier calls; callers
  // must advance(t) first so that earlier events come out in order). max_output_tokens >= 1.
  // Ids must be unique among live requests. A request whose prompt alone does not fit the KV
  // capacity gets a kRejected event from the next advance(); otherwise max_output_tokens is
  // clamped so that prompt + output fits (vLLM caps at max_model_len the same way).
  // `prefix_blocks`: chained hashes of the prompt's consecutive blocks of prefix_block_tokens
  // tokens (block i covers tokens [i*B, min((i+1)*B, prompt)); equal hash = equal prefix up to
  // and including that block). Extra hashes beyond the prompt are ignored.
  void submit(RequestId id, std::int64_t prompt_tokens, std::int32_t max_output_tokens, double t,
              std::span<const std::uint64_t> prefix_blocks = {});

  // As submit(), for a request whose first `cached_tokens` prompt tokens some cache outside
  // this replica already holds (the replay's ideal: one infinite cache shared by the fleet).
  // They are not prefilled and count as prefix-cache hits; the request still reserves KV for
  // its whole prompt while it runs, and leaves nothing in this replica's own prefix cache.
  void submit_externally_cached(RequestId id, std::int64_t prompt_tokens, std::int32_t max_output_tokens, double t,
                                std::int64_t cached_tokens);

  // Removes a request (client went away) at time t; frees its batch slot and KV at once.
  // Returns false when the id is unknown (already finished or never submitted).
  bool cancel(RequestId id, double t);

  // Earliest time > last advanced time at which something will happen, or +infinity when idle.
  double next_event_time() const;

  // Runs the model up to and including t; appends events in time order to `out`.
  void advance(double t, std::vector<Event>& out);
  std::vector<Event> advance(double t) {
    std::vector<Event> out;
    advance(t, out);
    return out;
  }

  bool loaded(double t) const { return t >= ready_at_; }
  double ready_at() const { return ready_at_; }
  Gauges gauges() const;
  PrefixCacheStats prefix_cache_stats() const;
  const TimingParams& params() const { return params_; }

  static constexpr double kNever = std::numeric_limits<double>::infinity();

 private:
  void submit_impl(RequestId id, std::int64_t prompt_tokens, std::int32_t max_output_tokens, double t,
                   std::span<const std::uint64_t> prefix_blocks, std::int64_t external_cached);
  struct Impl;
  TimingParams params_;
  double ready_at_;
  std::unique_ptr<Impl> impl_;
};

// Seconds of one continuous-batching step: `decoding` sequences emitting a token whose
// contexts sum to `decode_context_tokens`, plus a prefill chunk of `prefill_tokens` tokens
// starting at context position `prefill_context_start` (one sequence's chunk; a step with
// several chunks adds prefill_seconds() of each).
double step_seconds(const TimingParams& p, int decoding, std::int64_t decode_context_tokens,
                    std::int64_t prefill_tokens, std::int64_t prefill_context_start = 0);
// Compute time of prefilling tokens [context_start, context_start + tokens) of one prompt.
double prefill_seconds(const TimingParams& p, std::int64_t tokens, std::int64_t context_start);

}  // namespace tidegate::sim
