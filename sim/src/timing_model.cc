#include "tidegate/sim/timing_model.h"

#include <algorithm>
#include <deque>
#include <queue>
#include <unordered_map>

#include "timing_impl.h"

namespace tidegate::sim {

using detail::Pending;
using detail::Seq;

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

void TimingModel::Impl::admit_fixed(double t) {
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
void TimingModel::Impl::fire_fixed(std::vector<Event>& out) {
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
void TimingModel::Impl::flush_rejected(double upto, std::vector<Event>& out, std::size_t& ri) {
  while (ri < rejected.size() && rejected[ri].t <= upto) out.push_back(rejected[ri++]);
}


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
  submit_impl(id, prompt_tokens, max_output_tokens, t, prefix_blocks, 0);
}

void TimingModel::submit_externally_cached(RequestId id, std::int64_t prompt_tokens, std::int32_t max_output_tokens,
                                           double t, std::int64_t cached_tokens) {
  submit_impl(id, prompt_tokens, max_output_tokens, t, {}, cached_tokens);
}

void TimingModel::submit_impl(RequestId id, std::int64_t prompt_tokens, std::int32_t max_output_tokens, double t,
                              std::span<const std::uint64_t> prefix_blocks, std::int64_t external_cached) {
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
  if (!params_.fixed_latency) r.external_cached = std::clamp<std::int64_t>(external_cached, 0, prompt_tokens);
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
