#include "tidegate/sim/timing_model.h"

#include <algorithm>
#include <deque>
#include <queue>
#include <unordered_map>

#include "block_cache.h"

namespace tidegate::sim {

double prefill_seconds(const TimingParams& p, std::int64_t tokens, std::int64_t context_start) {
  if (!(p.prefill_tokens_per_s > 0) || tokens <= 0) return 0;
  double s = static_cast<double>(tokens) / p.prefill_tokens_per_s;
  // Token j of the chunk attends to context_start + j earlier tokens: on average
  // context_start + tokens / 2, each costing a fixed share of the linear layers' FLOPs.
  if (p.prefill_attention_context_tokens > 0)
    s *= 1.0 + (static_cast<double>(context_start) + 0.5 * static_cast<double>(tokens)) /
                   p.prefill_attention_context_tokens;
  return s;
}

double step_seconds(const TimingParams& p, int decoding, std::int64_t decode_context_tokens,
                    std::int64_t prefill_tokens, std::int64_t prefill_context_start) {
  // Decode is memory-bound: the weights are read once per step whatever the batch (base),
  // every sequence adds a little compute (per_seq) and reads its whole KV (per_kv_token).
  // Prefill is compute-bound. Mixing both in one step is vLLM's chunked prefill.
  return p.decode_base_s + p.decode_per_seq_s * decoding +
         p.decode_per_kv_token_s * static_cast<double>(decode_context_tokens) +
         prefill_seconds(p, prefill_tokens, prefill_context_start);
}

namespace {

struct Pending {
  RequestId id;
  std::uint64_t serial;
  std::int64_t prompt;
  std::int32_t n;  // output tokens to produce
  std::vector<std::uint64_t> blocks;
};

struct Seq {
  std::uint64_t serial = 0;
  std::int64_t prompt = 0;
  std::int32_t n = 0;
  std::int64_t computed = 0;     // prompt tokens with KV: cache hits + prefilled so far
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

}  // namespace

struct TimingModel::Impl {
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

  std::int64_t block_tokens(const Seq& s, std::size_t i) const {
    const std::int64_t b = p.prefix_block_tokens;
    return std::min<std::int64_t>(b, s.prompt - static_cast<std::int64_t>(i) * b);
  }

  // ---- continuous batching -------------------------------------------------------------
  void start_step(double t) {
    chunks.clear();
    ++step;
    step_start = t;
    // Token s of a sequence whose first token came at step f was produced at step f + s - 1,
    // so at the start of step `step` it holds prompt + (step - f) tokens of KV.
    const std::int64_t context = sum_prompt_dec + static_cast<std::int64_t>(decoding) * step - sum_first;
    step_fixed_s = p.decode_base_s + p.decode_per_seq_s * decoding + p.decode_per_kv_token_s * static_cast<double>(context);
    step_prefill_s = 0;
    budget_left = p.max_num_batched_tokens > 0 ? std::max<std::int64_t>(0, p.max_num_batched_tokens - decoding)
                                               : kUnlimited;
    // vLLM schedules running requests first: decodes (one token each, above), then the
    // unfinished prefills in arrival order, then new requests while the budget lasts.
    for (const RequestId id : prefilling) {
      if (budget_left <= 0) break;
      Seq& s = running.at(id);
      add_chunk(id, s, std::min(s.prompt - s.computed, budget_left));
    }
    admit_into_step();
    if (running.empty()) {
      --step;  // nothing to run: stay idle
      in_step = false;
      return;
    }
    in_step = true;
  }

  void add_chunk(RequestId id, const Seq& s, std::int64_t tokens) {
    chunks.push_back(Chunk{id, s.serial, tokens});
    step_prefill_s += prefill_seconds(p, tokens, s.computed);
    if (budget_left != kUnlimited) budget_left -= tokens;
  }

  // FCFS with head-of-line blocking, as vLLM's default scheduler: a big request at the head
  // is not overtaken by small ones behind it. Also used for arrivals at the very instant a step
  // starts, so that a burst submitted at one time t is batched together.
  void admit_into_step() {
    while (!waiting.empty() && budget_left > 0 && static_cast<int>(running.size()) < p.max_batch) {
      Pending& r = waiting.front();
      const std::span<const std::uint64_t> blocks(r.blocks);
      const std::size_t matched = cache.match(blocks);
      std::int64_t matched_tokens = 0;
      for (std::size_t i = 0; i < matched; ++i)
        matched_tokens += std::min<std::int64_t>(p.prefix_block_tokens, r.prompt - static_cast<std::int64_t>(i) * p.prefix_block_tokens);
      // vLLM reserves the whole prompt at admission (scheduler_reserve_full_isl); this model
      // also reserves the output, instead of preempting and recomputing later.
      const std::int64_t need = r.prompt - matched_tokens + r.n;
      const std::int64_t evictable = cache.evictable_tokens() - cache.unpinned_tokens_of(blocks.first(matched));
      if (private_kv + need + cache.resident_tokens() - evictable > p.kv_capacity_tokens) break;
      for (std::size_t i = 0; i < matched; ++i) cache.pin(r.blocks[i]);
      stats.evicted_tokens += cache.evict_until(p.kv_capacity_tokens - private_kv - need);

      Seq s;
      s.serial = r.serial;
      s.prompt = r.prompt;
      s.n = r.n;
      s.computed = std::min(matched_tokens, r.prompt - 1);  // the last token is always computed
      s.private_kv = need;
      s.prompt_private = r.prompt - matched_tokens;
      s.blocks = std::move(r.blocks);
      s.held = matched;
      private_kv += need;
      prompt_private += s.prompt_private;
      stats.queries_tokens += s.prompt;
      stats.hits_tokens += s.computed;
      const RequestId id = r.id;
      waiting_prompt -= r.prompt;
      waiting.pop_front();
      auto& seq = running.emplace(id, std::move(s)).first->second;
      order.emplace_back(id, seq.serial);
      prefilling.push_back(id);
      add_chunk(id, seq, std::min(seq.prompt - seq.computed, budget_left));
    }
    step_end = step_start + step_fixed_s + step_prefill_s;
  }

  // Blocks whose tokens are all computed become shared cache entries: their KV moves from
  // the sequence's private reservation to the cache (pinned by it).
  void register_blocks(Seq& s) {
    while (s.held < s.blocks.size()) {
      const std::int64_t end = std::min<std::int64_t>(static_cast<std::int64_t>(s.held + 1) * p.prefix_block_tokens, s.prompt);
      if (end > s.computed && s.computed < s.prompt) break;
      const std::int64_t tokens = block_tokens(s, s.held);
      cache.insert_pinned(s.blocks[s.held], static_cast<std::int32_t>(tokens));
      s.private_kv -= tokens;
      s.prompt_private -= tokens;
      private_kv -= tokens;
      prompt_private -= tokens;
      ++s.held;
    }
  }

  void release(Seq& s) {
    private_kv -= s.private_kv;
    prompt_private -= s.prompt_private;
    // Tail first, as vLLM frees them: the LRU then evicts a prompt's last blocks before its
    // first ones, which other prompts are likelier to share (and without which the rest of
    // the chain is useless).
    for (std::size_t i = s.held; i-- > 0;) cache.unpin(s.blocks[i]);
    if (s.first_step >= 0) {
      --decoding;
      sum_first -= s.first_step;
      sum_prompt_dec -= s.prompt;
    }
  }

  void finish_step(std::vector<Event>& out) {
    const double t = step_end;
    std::vector<RequestId> prefilled;
    for (const Chunk& c : chunks) {
      auto it = running.find(c.id);
      if (it == running.end() || it->second.serial != c.serial) continue;  // cancelled
      Seq& s = it->second;
      s.computed += c.tokens;
      register_blocks(s);
      if (s.computed < s.prompt) continue;
      s.first_step = step;
      prefilled.push_back(c.id);
      due.push(Due{static_cast<double>(step + s.n - 1), next_order++, c.id, s.serial});
    }
    if (p.emit_token_events) {
      for (const auto& [id, serial] : order) {
        auto it = running.find(id);
        if (it == running.end() || it->second.serial != serial || it->second.first_step < 0) continue;
        const Seq& s = it->second;
        const auto tokens = static_cast<std::int32_t>(step - s.first_step + 1);
        out.push_back(Event{tokens == 1 ? EventKind::kFirstToken : EventKind::kToken, id, t, tokens});
        if (tokens == s.n) out.push_back(Event{EventKind::kFinished, id, t, tokens});
      }
    } else {
      for (RequestId id : prefilled) out.push_back(Event{EventKind::kFirstToken, id, t, 1});
    }
    if (!prefilled.empty()) {
      std::erase_if(prefilling, [&](RequestId id) { return running.at(id).first_step >= 0; });
      for (RequestId id : prefilled) {
        const Seq& s = running.at(id);
        ++decoding;
        sum_first += s.first_step;
        sum_prompt_dec += s.prompt;
      }
    }
    while (!due.empty() && due.top().key <= static_cast<double>(step)) {
      Due d = due.top();
      due.pop();
      auto it = running.find(d.id);
      if (it == running.end() || it->second.serial != d.serial) continue;  // cancelled
      if (!p.emit_token_events) out.push_back(Event{EventKind::kFinished, d.id, t, it->second.n});
      release(it->second);
      running.erase(it);
    }
    if (order.size() > 2 * running.size() + 16) {
      std::erase_if(order, [&](const auto& e) {
        auto it = running.find(e.first);
        return it == running.end() || it->second.serial != e.second;
      });
    }
    in_step = false;
    now = t;
    start_step(t);
  }

  // ---- fixed latency ---------------------------------------------------------------------
  void admit_fixed(double t) {
    while (!waiting.empty() && static_cast<int>(running.size()) < p.max_batch) {
      Pending r = std::move(waiting.front());
      waiting.pop_front();
      waiting_prompt -= r.prompt;
      Seq s;
      s.serial = r.serial;
      s.prompt = r.prompt;
      s.n = r.n;
      running.emplace(r.id, std::move(s));
      fixed_prompt += r.prompt;
      due.push(Due{t + p.ttft_s, next_order++, r.id, r.serial});
    }
  }

  void fire_fixed(std::vector<Event>& out) {
    Due d = due.top();
    due.pop();
    auto it = running.find(d.id);
    if (it == running.end() || it->second.serial != d.serial) return;
    Seq& r = it->second;
    const double t = d.key;
    now = t;
    const std::int32_t tokens = p.emit_token_events ? r.emitted + 1 : (r.emitted == 0 ? 1 : r.n);
    fixed_generated += tokens - r.emitted;
    r.emitted = tokens;
    if (tokens == 1 || p.emit_token_events)
      out.push_back(Event{tokens == 1 ? EventKind::kFirstToken : EventKind::kToken, d.id, t, tokens});
    if (tokens >= r.n) {
      out.push_back(Event{EventKind::kFinished, d.id, t, r.n});
      fixed_generated -= r.emitted;
      fixed_prompt -= r.prompt;
      running.erase(it);
      admit_fixed(t);
      return;
    }
    // Without token events, jump straight to the last token: one heap operation per request.
    const double next = p.emit_token_events ? t + p.tpot_s : t + p.tpot_s * (r.n - 1);
    due.push(Due{next, next_order++, d.id, d.serial});
  }

  void flush_rejected(double upto, std::vector<Event>& out, std::size_t& ri) {
    while (ri < rejected.size() && rejected[ri].t <= upto) out.push_back(rejected[ri++]);
  }
};

TimingModel::TimingModel(const TimingParams& params, double t0) : params_(params), ready_at_(t0 + params.startup_s) {
  if (params_.max_batch < 1) params_.max_batch = 1;
  if (params_.prefix_block_tokens < 1) params_.prefix_block_tokens = 1;
  if (params_.max_num_batched_tokens < 0) params_.max_num_batched_tokens = 0;
  impl_ = std::make_unique<Impl>(params_, t0);
}

TimingModel::TimingModel(const TimingModel& other)
    : params_(other.params_), ready_at_(other.ready_at_), impl_(std::make_unique<Impl>(*other.impl_)) {}

TimingModel::~TimingModel() = default;

void TimingModel::submit(RequestId id, std::int64_t prompt_tokens, std::int32_t max_output_tokens, double t,
                         std::span<const std::uint64_t> prefix_blocks) {
  Impl& m = *impl_;
  if (t > m.now) m.now = t;
  prompt_tokens = std::max<std::int64_t>(prompt_tokens, 1);  // a chat template is never empty
  max_output_tokens = std::max<std::int32_t>(max_output_tokens, 1);
  if (!params_.fixed_latency) {
    if (prompt_tokens + 1 > params_.kv_capacity_tokens) {
      m.rejected.push_back(Event{EventKind::kRejected, id, m.now, 0});
      return;
    }
    max_output_tokens = static_cast<std::int32_t>(
        std::min<std::int64_t>(max_output_tokens, params_.kv_capacity_tokens - prompt_tokens));
  }
  Pending r{id, m.next_serial++, prompt_tokens, max_output_tokens, {}};
  if (params_.prefix_caching && !params_.fixed_latency && !prefix_blocks.empty()) {
    const std::int64_t b = params_.prefix_block_tokens;
    const auto n = static_cast<std::size_t>(std::min<std::int64_t>(
        static_cast<std::int64_t>(prefix_blocks.size()), (prompt_tokens + b - 1) / b));
    r.blocks.assign(prefix_blocks.begin(), prefix_blocks.begin() + static_cast<std::ptrdiff_t>(n));
  }
  m.waiting_prompt += prompt_tokens;
  m.waiting.push_back(std::move(r));
  if (m.now < ready_at_) return;  // the kick at ready_at admits it
  if (params_.fixed_latency) {
    m.admit_fixed(m.now);
  } else if (!m.in_step) {
    m.start_step(m.now);
  } else if (m.step_start == m.now) {
    m.admit_into_step();
  }
}

bool TimingModel::cancel(RequestId id, double t) {
  Impl& m = *impl_;
  if (t > m.now) m.now = t;
  auto w = std::find_if(m.waiting.begin(), m.waiting.end(), [&](const Pending& r) { return r.id == id; });
  if (w != m.waiting.end()) {
    m.waiting_prompt -= w->prompt;
    m.waiting.erase(w);
    return true;
  }
  auto it = m.running.find(id);
  if (it == m.running.end()) return false;
  if (params_.fixed_latency) {
    m.fixed_prompt -= it->second.prompt;
    m.fixed_generated -= it->second.emitted;
    m.running.erase(it);
    m.admit_fixed(m.now);
  } else {
    // Its slot and KV are reused from the next step on; the step in progress keeps its duration.
    if (it->second.first_step < 0) std::erase(m.prefilling, id);
    m.release(it->second);
    m.running.erase(it);
  }
  return true;
}

double TimingModel::next_event_time() const {
  const Impl& m = *impl_;
  double next = kNever;
  if (!m.rejected.empty()) next = m.rejected.front().t;
  if (m.now < ready_at_ && !m.waiting.empty()) next = std::min(next, ready_at_);
  if (params_.fixed_latency) {
    if (!m.due.empty()) next = std::min(next, m.due.top().key);
  } else if (m.in_step) {
    next = std::min(next, m.step_end);
  }
  return next;
}

void TimingModel::advance(double t, std::vector<Event>& out) {
  Impl& m = *impl_;
  std::size_t ri = 0;
  for (;;) {
    // The load-finished kick: queued requests start at ready_at.
    if (m.now < ready_at_ && ready_at_ <= t) {
      m.flush_rejected(ready_at_, out, ri);
      m.now = ready_at_;
      if (params_.fixed_latency) m.admit_fixed(ready_at_);
      else if (!m.in_step) m.start_step(ready_at_);
    }
    double next = kNever;
    if (params_.fixed_latency) {
      if (!m.due.empty()) next = m.due.top().key;
    } else if (m.in_step) {
      next = m.step_end;
    }
    if (next > t) break;
    m.flush_rejected(next, out, ri);
    if (params_.fixed_latency) m.fire_fixed(out);
    else m.finish_step(out);
  }
  m.flush_rejected(t, out, ri);
  m.rejected.erase(m.rejected.begin(), m.rejected.begin() + static_cast<std::ptrdiff_t>(ri));
  if (t > m.now) m.now = t;
}

Gauges TimingModel::gauges() const {
  const Impl& m = *impl_;
  Gauges g;
  g.running = static_cast<int>(m.running.size());
  g.waiting = static_cast<int>(m.waiting.size());
  g.prefill_backlog_tokens = m.waiting_prompt;
  if (params_.fixed_latency) {
    g.decoding = g.running;
    g.kv_used_tokens = m.fixed_prompt + m.fixed_generated;
  } else {
    g.decoding = m.decoding;
    // Tokens generated by a decoding sequence = steps completed since its first token, + 1.
    const std::int64_t done = m.in_step ? m.step - 1 : m.step;
    const std::int64_t generated = static_cast<std::int64_t>(m.decoding) * (done + 1) - m.sum_first;
    g.kv_used_tokens = m.cache.pinned_tokens() + m.prompt_private + generated;
    for (const RequestId id : m.prefilling) {
      const Seq& s = m.running.at(id);
      g.prefill_backlog_tokens += s.prompt - s.computed;
    }
  }
  g.kv_usage = params_.kv_capacity_tokens > 0
                   ? std::clamp(static_cast<double>(g.kv_used_tokens) / params_.kv_capacity_tokens, 0.0, 1.0)
                   : 0.0;
  return g;
}

PrefixCacheStats TimingModel::prefix_cache_stats() const {
  PrefixCacheStats s = impl_->stats;
  s.resident_tokens = impl_->cache.resident_tokens();
  return s;
}

}  // namespace tidegate::sim
