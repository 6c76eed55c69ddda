#pragma once
// Drives one TimingModel in real time: model time is seconds since the engine started, one
// steady_timer wakes the model at its next event, and events are handed to each request's sink.
#include "tidegate/sim/timing_model.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace tidegate::sim {

class EventSink {
 public:
  virtual ~EventSink() = default;
  // Called with the engine's lock held, in event order: implementations only post work to
  // their own executor (never call back into the engine inline).
  virtual void on_events(std::vector<Event> events) = 0;
};

class Engine final {
 public:
  Engine(boost::asio::io_context& io, const TimingParams& params);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Returns the model-side id. The sink is released after its kFinished/kRejected event.
  // Events of this request that are already due (a zero-latency reply) are appended to
  // `due_now` instead of being posted: the caller is on its own strand and handles them inline,
  // which saves a hand-off per request.
  RequestId submit(std::int64_t prompt_tokens, std::int32_t max_output_tokens, std::span<const std::uint64_t> prefix_blocks,
                   std::shared_ptr<EventSink> sink, std::vector<Event>& due_now);
  void cancel(RequestId id);
  bool loaded() const;
  Gauges gauges() const;
  PrefixCacheStats prefix_cache_stats() const;
  double now() const;  // model time, seconds

 private:
  void pump_locked(double t, RequestId inline_id = 0, std::vector<Event>* inline_out = nullptr);
  void arm_locked();

  using Clock = std::chrono::steady_clock;
  const Clock::time_point start_;
  mutable std::mutex mu_;
  TimingModel model_;
  RequestId next_id_ = 1;
  std::unordered_map<RequestId, std::shared_ptr<EventSink>> sinks_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::steady_timer timer_;
  double armed_for_ = TimingModel::kNever;
  std::vector<Event> scratch_;
};

}  // namespace tidegate::sim
