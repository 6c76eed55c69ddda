#include "tidegate/sim/timing_model.h"

#include <algorithm>
#include <deque>
#include <queue>
#include <unordered_map>

namespace tidegate::sim {

double step_seconds(const TimingParams& p, int decoding, std::int64_t prefill_tokens) {
  // Decode is memory-bound: the weights are read once per step whatever the batch (base), and
  // every sequence adds its KV reads and a little compute (per_seq). Prefill is compute-bound,
  // so its tokens cost time at the prefill rate. Mixing both in one step is vLLM's chunked
  // prefill (the V1 engine default) without a chunk limit.
  double s = p.decode_base_s + p.decode_per_seq_s * decoding;
  if (p.prefill_tokens_per_s > 0) s += static_cast<double>(prefill_tokens) / p.prefill_tokens_per_s;
  return s;
}

namespace {

struct Pending {
  RequestId id;
  std::uint64_t serial;
  std::int64_t prompt;
  std::int32_t n;  // output tokens to produce
};

struct Running {
  std::uint64_t serial;
  std::int64_t prompt;
  std::int32_t n;
  std::int64_t admit_step;  // continuous mode: step that prefills it (emits token 1)
  std::int32_t emitted;     // fixed mode: tokens emitted so far
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

}  // namespace

struct TimingModel::Impl {
  const TimingParams& p;
  double ready_at;
  double now;
  std::uint64_t next_serial = 1;
  std::uint64_t next_order = 1;

  std::deque<Pending> waiting;
  std::unordered_map<RequestId, Running> running;
  std::vector<Event> rejected;  // reported by advance() at their submit time
  DueHeap due;
  std::int64_t reserved = 0;     // KV promised to running sequences (prompt + n)
  std::int64_t sum_prompt = 0;   // prompt tokens of running sequences

  // Continuous mode.
  bool in_step = false;
  double step_start = 0;
  double step_end = 0;
  int step_decoding = 0;          // sequences decoding in the step in progress
  std::int64_t step_prefill = 0;  // prompt tokens prefilled in the step in progress
  std::int64_t step = -1;         // index of the step in progress (or last one run)
  std::int64_t sum_admit = 0;     // sum of admit_step over running sequences
  std::vector<std::pair<RequestId, std::uint64_t>> order;  // admission order, lazily compacted
  std::vector<RequestId> prefilling;                        // admitted in the step in progress

  // Fixed mode: generated tokens of running sequences, counted as events go out.
  std::int64_t fixed_generated = 0;

  Impl(const TimingParams& params, double ready, double t0) : p(params), ready_at(ready), now(t0) {}

  bool fits(const Pending& r) const {
    if (static_cast<int>(running.size()) >= p.max_batch) return false;
    if (p.fixed_latency) return true;
    return reserved + r.prompt + r.n <= p.kv_capacity_tokens;
  }

  // ---- continuous batching -------------------------------------------------------------
  void start_step(double t) {
    prefilling.clear();
    ++step;
    step_start = t;
    step_decoding = static_cast<int>(running.size());
    step_prefill = 0;
    admit_into_step();
    if (running.empty()) {
      --step;  // nothing to run: stay idle
      in_step = false;
      return;
    }
    in_step = true;
  }

  // FCFS with head-of-line blocking, as vLLM's default scheduler: a big request at the head
  // is not overtaken by small ones behind it. Also used for arrivals at the very instant a step
  // starts, so that a burst submitted at one time t is batched together.
  void admit_into_step() {
    while (!waiting.empty() && fits(waiting.front())) {
      Pending r = waiting.front();
      waiting.pop_front();
      running.emplace(r.id, Running{r.serial, r.prompt, r.n, step, 0});
      order.emplace_back(r.id, r.serial);
      prefilling.push_back(r.id);
      due.push(Due{static_cast<double>(step + r.n - 1), next_order++, r.id, r.serial});
      reserved += r.prompt + r.n;
      sum_prompt += r.prompt;
      sum_admit += step;
      step_prefill += r.prompt;
    }
    step_end = step_start + step_seconds(p, step_decoding, step_prefill);
  }

  void release(RequestId id, const Running& r) {
    reserved -= r.prompt + r.n;
    sum_prompt -= r.prompt;
    sum_admit -= r.admit_step;
    (void)id;
  }

  void finish_step(std::vector<Event>& out) {
    const double t = step_end;
    if (p.emit_token_events) {
      for (const auto& [id, serial] : order) {
        auto it = running.find(id);
        if (it == running.end() || it->second.serial != serial) continue;
        const Running& r = it->second;
        const auto tokens = static_cast<std::int32_t>(step - r.admit_step + 1);
        out.push_back(Event{tokens == 1 ? EventKind::kFirstToken : EventKind::kToken, id, t, tokens});
        if (tokens == r.n) out.push_back(Event{EventKind::kFinished, id, t, tokens});
      }
    } else {
      for (RequestId id : prefilling) {
        if (running.count(id)) out.push_back(Event{EventKind::kFirstToken, id, t, 1});
      }
    }
    while (!due.empty() && due.top().key <= static_cast<double>(step)) {
      Due d = due.top();
      due.pop();
      auto it = running.find(d.id);
      if (it == running.end() || it->second.serial != d.serial) continue;  // cancelled
      if (!p.emit_token_events) out.push_back(Event{EventKind::kFinished, d.id, t, it->second.n});
      release(d.id, it->second);
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
    while (!waiting.empty() && fits(waiting.front())) {
      Pending r = waiting.front();
      waiting.pop_front();
      running.emplace(r.id, Running{r.serial, r.prompt, r.n, 0, 0});
      sum_prompt += r.prompt;
      due.push(Due{t + p.ttft_s, next_order++, r.id, r.serial});
    }
  }

  void fire_fixed(std::vector<Event>& out) {
    Due d = due.top();
    due.pop();
    auto it = running.find(d.id);
    if (it == running.end() || it->second.serial != d.serial) return;
    Running& r = it->second;
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
      sum_prompt -= r.prompt;
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

TimingModel::TimingModel(const TimingParams& params, double t0)
    : params_(params), ready_at_(t0 + params.startup_s), impl_(std::make_unique<Impl>(params_, ready_at_, t0)) {
  if (params_.max_batch < 1) params_.max_batch = 1;
}

TimingModel::~TimingModel() = default;

void TimingModel::submit(RequestId id, std::int64_t prompt_tokens, std::int32_t max_output_tokens, double t) {
  Impl& m = *impl_;
  if (t > m.now) m.now = t;
  prompt_tokens = std::max<std::int64_t>(prompt_tokens, 0);
  max_output_tokens = std::max<std::int32_t>(max_output_tokens, 1);
  if (!params_.fixed_latency) {
    if (prompt_tokens + 1 > params_.kv_capacity_tokens) {
      m.rejected.push_back(Event{EventKind::kRejected, id, m.now, 0});
      return;
    }
    max_output_tokens = static_cast<std::int32_t>(
        std::min<std::int64_t>(max_output_tokens, params_.kv_capacity_tokens - prompt_tokens));
  }
  m.waiting.push_back(Pending{id, m.next_serial++, prompt_tokens, max_output_tokens});
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
    m.waiting.erase(w);
    return true;
  }
  auto it = m.running.find(id);
  if (it == m.running.end()) return false;
  if (params_.fixed_latency) {
    m.sum_prompt -= it->second.prompt;
    m.fixed_generated -= it->second.emitted;
    m.running.erase(it);
    m.admit_fixed(m.now);
  } else {
    // Its slot is reused from the next step on; the step in progress keeps its duration.
    m.release(id, it->second);
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
  if (params_.fixed_latency) {
    g.kv_used_tokens = m.sum_prompt + m.fixed_generated;
  } else {
    // Tokens generated by a running sequence = steps completed since its admission.
    const std::int64_t done = m.in_step ? m.step - 1 : m.step;
    g.kv_used_tokens = m.sum_prompt + static_cast<std::int64_t>(m.running.size()) * (done + 1) - m.sum_admit;
    // Sequences admitted in the step in progress have generated nothing yet (admit = done + 1).
  }
  g.kv_usage = params_.kv_capacity_tokens > 0
                   ? std::clamp(static_cast<double>(g.kv_used_tokens) / params_.kv_capacity_tokens, 0.0, 1.0)
                   : 0.0;
  return g;
}

}  // namespace tidegate::sim
