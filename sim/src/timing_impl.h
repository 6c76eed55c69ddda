#pragma once
// TimingModel's state, shared by its two translation units: timing_model.cc (the public API
// and the fixed-latency mode) and continuous_batching.cc (steps, chunks, the prefix cache).
#include <deque>
#include <limits>
#include <queue>
#include <unordered_map>
#include <vector>

#include "block_cache.h"
#include "tidegate/sim/timing_model.h"

namespace tidegate::sim {
namespace detail {

struct Pending {
  RequestId id;
  std::uint64_t serial;
  std::int64_t prompt;
  std::int32_t n;  // output tokens to produce
  std::vector<std::uint64_t> blocks;
  std::int64_t external_cached = 0;  // prompt tokens held by a cache outside the replica
};

struct Seq {
  std::uint64_t serial = 0;
  std::int64_t prompt = 0;
  std::int32_t n = 0;
  std::int64_t computed = 0;     // prompt tokens with KV: cache hits + prefilled so far
  std::int64_t cached = 0;       // of which found cached at admission (vLLM's cached_tokens)
  std::int64_t first_step = -1;  // continuous mode: the step that emitted token 1
  std::int32_t emitted = 0;      // fixed mode: tokens emitted so far
  std::int64_t private_kv = 0;   // KV reserved outside shared blocks (prompt tail + output)
  std::int64_t prompt_private = 0;  // the prompt part of private_kv
  std::vector<std::uint64_t> blocks;
  std::size_t held = 0;          // blocks [0, held) are pinned in the cache by this sequence
};

// Min-heap entry; `key` is a step index (continuous) or a time (fixed), ties FIFO by `order`.
struct Due {
  double key;
  std::uint64_t order;
  RequestId id;
  std::uint64_t serial;
  bool operator>(const Due& o) const { return key != o.key ? key > o.key : order > o.order; }
};
using DueHeap = std::priority_queue<Due, std::vector<Due>, std::greater<Due>>;

struct Chunk {
  RequestId id;
  std::uint64_t serial;
  std::int64_t tokens;
};

constexpr std::int64_t kUnlimited = std::numeric_limits<std::int64_t>::max();


}  // namespace detail

struct TimingModel::Impl {
  using Pending = detail::Pending;
  using Seq = detail::Seq;
  using Due = detail::Due;
  using DueHeap = detail::DueHeap;
  using Chunk = detail::Chunk;

  TimingParams p;
  double now;
  std::uint64_t next_serial = 1;
  std::uint64_t next_order = 1;

  std::deque<Pending> waiting;
  std::int64_t waiting_prompt = 0;
  std::unordered_map<RequestId, Seq> running;
  std::vector<Event> rejected;  // reported by advance() at their submit time
  DueHeap due;

  // KV: private reservations plus resident prefix blocks never exceed the capacity.
  detail::BlockCache cache;
  std::int64_t private_kv = 0;
  std::int64_t prompt_private = 0;
  PrefixCacheStats stats;

  // Continuous mode.
  bool in_step = false;
  double step_start = 0;
  double step_end = 0;
  double step_fixed_s = 0;        // decode part of the step in progress
  double step_prefill_s = 0;      // prefill part of the step in progress
  std::int64_t budget_left = 0;   // token budget left in the step in progress
  std::int64_t step = -1;         // index of the step in progress (or last one run)
  std::vector<Chunk> chunks;      // prompt chunks of the step in progress
  std::vector<RequestId> prefilling;  // admitted, prefill unfinished, FCFS
  std::vector<std::pair<RequestId, std::uint64_t>> order;  // admission order, lazily compacted
  int decoding = 0;               // sequences past their first token
  std::int64_t sum_first = 0;     // sum of first_step over decoding sequences
  std::int64_t sum_prompt_dec = 0;  // prompt tokens of decoding sequences

  // Fixed mode: prompt and generated tokens of running sequences, counted as events go out.
  std::int64_t fixed_prompt = 0;
  std::int64_t fixed_generated = 0;

  Impl(const TimingParams& params, double t0) : p(params), now(t0) {}

  // ---- continuous batching (continuous_batching.cc) ------------------------------------
  std::int64_t block_tokens(const Seq& s, std::size_t i) const;
  // Starts a step at t: decodes, unfinished prefills, then admissions, within the budget.
  void start_step(double t);
  void add_chunk(RequestId id, const Seq& s, std::int64_t tokens);
  // FCFS with head-of-line blocking, as vLLM's default scheduler: a big request at the head
  // is not overtaken by small ones behind it. Also used for arrivals at the very instant a step
  // starts, so that a burst submitted at one time t is batched together.
  void admit_into_step();
  // Blocks whose tokens are all computed become shared cache entries: their KV moves from
  // the sequence's private reservation to the cache (pinned by it).
  void register_blocks(Seq& s);
  void release(Seq& s);
  void finish_step(std::vector<Event>& out);
  // ---- fixed latency (timing_model.cc) ---------------------------------------------------
  void admit_fixed(double t);
  void fire_fixed(std::vector<Event>& out);
  void flush_rejected(double upto, std::vector<Event>& out, std::size_t& ri);
};

}  // namespace tidegate::sim
