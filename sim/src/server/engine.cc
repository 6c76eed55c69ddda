#include "engine.h"

#include <boost/asio/post.hpp>

#include <cmath>

namespace tidegate::sim {

Engine::Engine(boost::asio::io_context& io, const TimingParams& params)
    : start_(Clock::now()), model_(params, 0.0), strand_(boost::asio::make_strand(io)), timer_(strand_) {}

double Engine::now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

bool Engine::loaded() const { return model_.loaded(now()); }  // ready_at is immutable

Gauges Engine::gauges() const {
  std::lock_guard lock(mu_);
  return model_.gauges();
}

PrefixCacheStats Engine::prefix_cache_stats() const {
  std::lock_guard lock(mu_);
  return model_.prefix_cache_stats();
}

RequestId Engine::submit(std::int64_t prompt_tokens, std::int32_t max_output_tokens,
                         std::span<const std::uint64_t> prefix_blocks, std::shared_ptr<EventSink> sink,
                         std::vector<Event>& due_now) {
  std::lock_guard lock(mu_);
  const double t = now();
  // Earlier events first, so that this submit lands after them in model time.
  pump_locked(t);
  const RequestId id = next_id_++;
  sinks_.emplace(id, std::move(sink));
  model_.submit(id, prompt_tokens, max_output_tokens, t, prefix_blocks);
  pump_locked(t, id, &due_now);
  return id;
}

void Engine::cancel(RequestId id) {
  std::lock_guard lock(mu_);
  const double t = now();
  pump_locked(t);
  model_.cancel(id, t);
  sinks_.erase(id);
  arm_locked();
}

void Engine::pump_locked(double t, RequestId inline_id, std::vector<Event>* inline_out) {
  scratch_.clear();
  model_.advance(t, scratch_);
  if (scratch_.empty()) {
    arm_locked();
    return;
  }
  // One post per request per pump: a zero-latency reply is delivered in a single hand-off.
  std::unordered_map<RequestId, std::vector<Event>> groups;
  for (const Event& e : scratch_) groups[e.id].push_back(e);
  for (auto& [id, batch] : groups) {
    auto it = sinks_.find(id);
    if (it == sinks_.end()) continue;
    const EventKind last = batch.back().kind;
    if (inline_out && id == inline_id) inline_out->insert(inline_out->end(), batch.begin(), batch.end());
    else it->second->on_events(std::move(batch));
    if (last == EventKind::kFinished || last == EventKind::kRejected) sinks_.erase(it);
  }
  arm_locked();
}

void Engine::arm_locked() {
  const double next = model_.next_event_time();
  if (next == TimingModel::kNever || next >= armed_for_) return;
  armed_for_ = next;
  // Round up to the next microsecond so the wake-up is never before the event.
  const auto at = start_ + std::chrono::microseconds(static_cast<std::int64_t>(std::ceil(next * 1e6)) + 1);
  timer_.expires_at(at);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (ec == boost::asio::error::operation_aborted) return;
    std::lock_guard lock(mu_);
    armed_for_ = TimingModel::kNever;
    pump_locked(now());
  });
}

}  // namespace tidegate::sim
