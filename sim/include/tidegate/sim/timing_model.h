#pragma once
// Timing model of a continuous-batching inference server (vLLM-like), in explicit virtual time.
//
// Pure: no clocks, no threads, no I/O. The caller owns time: it submits requests at time t and
// calls advance(t) to learn what happened up to t. The same code runs in real time inside
// tidegate-sim (t = seconds since start) and in virtual time inside the trace replayer, where an
// hour of traffic must replay in seconds; hence per-token events are optional and a decode step
// costs O(log n) per finishing sequence, not O(batch), when they are off.
//
// Not thread-safe: one owner (or a mutex around it).
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace tidegate::sim {

using RequestId = std::uint64_t;

struct TimingParams {
  // Fixed-latency mode: every admitted request gets exactly ttft_s to its first token and tpot_s
  // between tokens, whatever the load; only max_batch still applies (extra requests wait).
  bool fixed_latency = false;
  double ttft_s = 0.0;
  double tpot_s = 0.0;

  // Continuous batching. Defaults: Llama-3.1-8B BF16 on one A100-80GB SXM under vLLM; where
  // each number comes from is in sim/README.md.
  int max_batch = 256;                     // vLLM --max-num-seqs default
  double prefill_tokens_per_s = 10000.0;   // prompt tokens per second of step time (~50% MFU)
  double decode_base_s = 0.010;            // decode step at batch 1: weights streamed once
  double decode_per_seq_s = 0.0001;        // extra step time per running sequence
  std::int64_t kv_capacity_tokens = 400000;  // KV slots: (72 - 16 - 2) GiB / 128 KiB per token
  double startup_s = 0.0;                 // model load time before the first step can run

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
};

struct Gauges {
  int running = 0;                  // sequences in the batch
  int waiting = 0;                  // submitted, not yet admitted
  std::int64_t kv_used_tokens = 0;  // prompt + generated tokens of running sequences
  double kv_usage = 0.0;            // kv_used_tokens / kv_capacity_tokens, in [0, 1]
};

class TimingModel final {
 public:
  // `t0` is the virtual time at which the server process starts (loading begins).
  explicit TimingModel(const TimingParams& params, double t0 = 0.0);
  ~TimingModel();
  TimingModel(const TimingModel&) = delete;
  TimingModel& operator=(const TimingModel&) = delete;

  // Queues a request arriving at t (t must not go backwards relative to earlier calls; callers
  // must advance(t) first so that earlier events come out in order). max_output_tokens >= 1.
  // Ids must be unique among live requests. A request whose prompt alone does not fit the KV
  // capacity gets a kRejected event from the next advance(); otherwise max_output_tokens is
  // clamped so that prompt + output fits (vLLM caps at max_model_len the same way).
  void submit(RequestId id, std::int64_t prompt_tokens, std::int32_t max_output_tokens, double t);

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
  const TimingParams& params() const { return params_; }

  static constexpr double kNever = std::numeric_limits<double>::infinity();

 private:
  struct Impl;
  TimingParams params_;
  double ready_at_;
  std::unique_ptr<Impl> impl_;
};

// Step time of one continuous-batching iteration with `decoding` sequences emitting a token and
// `prefill_tokens` prompt tokens being prefilled in the same step (chunked-prefill style).
double step_seconds(const TimingParams& p, int decoding, std::int64_t prefill_tokens);

}  // namespace tidegate::sim
