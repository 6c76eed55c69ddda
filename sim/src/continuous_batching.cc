#include "timing_impl.h"

#include <algorithm>

namespace tidegate::sim {

using detail::kUnlimited;

std::int64_t TimingModel::Impl::block_tokens(const Seq& s, std::size_t i) const {
  const std::int64_t b = p.prefix_block_tokens;
  return std::min<std::int64_t>(b, s.prompt - static_cast<std::int64_t>(i) * b);
}

void TimingModel::Impl::start_step(double t) {
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

void TimingModel::Impl::add_chunk(RequestId id, const Seq& s, std::int64_t tokens) {
  chunks.push_back(Chunk{id, s.serial, tokens});
  step_prefill_s += prefill_seconds(p, tokens, s.computed);
  if (budget_left != kUnlimited) budget_left -= tokens;
}

// FCFS with head-of-line blocking, as vLLM's default scheduler: a big request at the head
// is not overtaken by small ones behind it. Also used for arrivals at the very instant a step
// starts, so that a burst submitted at one time t is batched together.
void TimingModel::Impl::admit_into_step() {
  while (!waiting.empty() && budget_left > 0 && static_cast<int>(running.size()) < p.max_batch) {
    Pending& r = waiting.front();
    const std::span<const std::uint64_t> blocks(r.blocks);
    const std::size_t matched = cache.match(blocks);
    std::int64_t matched_tokens = 0;
    for (std::size_t i = 0; i < matched; ++i)
      matched_tokens += std::min<std::int64_t>(p.prefix_block_tokens, r.prompt - static_cast<std::int64_t>(i) * p.prefix_block_tokens);
    // vLLM reserves the whole prompt at admission (scheduler_reserve_full_isl); this model
    // also reserves the output, instead of preempting and recomputing later. A prefix held
    // outside the replica (external_cached) skips prefill but still takes KV here.
    const std::int64_t need = r.prompt - matched_tokens + r.n;
    const std::int64_t skipped = std::max(matched_tokens, r.external_cached);
    const std::int64_t evictable = cache.evictable_tokens() - cache.unpinned_tokens_of(blocks.first(matched));
    if (private_kv + need + cache.resident_tokens() - evictable > p.kv_capacity_tokens) break;
    for (std::size_t i = 0; i < matched; ++i) cache.pin(r.blocks[i]);
    stats.evicted_tokens += cache.evict_until(p.kv_capacity_tokens - private_kv - need);

    Seq s;
    s.serial = r.serial;
    s.prompt = r.prompt;
    s.n = r.n;
    s.computed = std::min(skipped, r.prompt - 1);  // the last token is always computed
    s.cached = s.computed;
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
void TimingModel::Impl::register_blocks(Seq& s) {
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

void TimingModel::Impl::release(Seq& s) {
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

void TimingModel::Impl::finish_step(std::vector<Event>& out) {
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
      out.push_back(Event{tokens == 1 ? EventKind::kFirstToken : EventKind::kToken, id, t, tokens,
                          tokens == 1 ? s.cached : 0});
      if (tokens == s.n) out.push_back(Event{EventKind::kFinished, id, t, tokens});
    }
  } else {
    for (RequestId id : prefilled) out.push_back(Event{EventKind::kFirstToken, id, t, 1, running.at(id).cached});
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

}  // namespace tidegate::sim
