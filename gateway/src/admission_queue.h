#pragma once
// Per-model FIFO of requests waiting for a replica slot. Bounded in length; the wait bound
// is enforced by each waiter's own timer, which calls remove(). Not thread-safe: the
// ReplicaPool guards it with its mutex.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

namespace tidegate::gateway {

using Clock = std::chrono::steady_clock;

template <typename Payload>
class AdmissionQueue final {
 public:
  explicit AdmissionQueue(std::size_t max_length) : max_length_(max_length) {}
  void set_max_length(std::size_t n) { max_length_ = n; }

  // Returns a ticket, or nullopt when the queue is full.
  std::optional<std::uint64_t> push(Payload payload, Clock::time_point now) {
    if (items_.size() >= max_length_) return std::nullopt;
    const auto ticket = next_ticket_++;
    items_.push_back(Item{ticket, now, std::move(payload)});
    return ticket;
  }
  // Oldest waiter; records its wait for the percentile signal.
  std::optional<Payload> pop(Clock::time_point now) {
    if (items_.empty()) return std::nullopt;
    auto item = std::move(items_.front());
    items_.pop_front();
    record_wait(now - item.enqueued);
    return std::move(item.payload);
  }
  // Removes a waiter that gave up (timeout, client gone). False if it was already popped.
  bool remove(std::uint64_t ticket, Clock::time_point now) {
    for (auto it = items_.begin(); it != items_.end(); ++it) {
      if (it->ticket != ticket) continue;
      record_wait(now - it->enqueued);
      items_.erase(it);
      return true;
    }
    return false;
  }
  // The oldest waiter's payload, left in place (the queue must not be empty).
  const Payload& front() const { return items_.front().payload; }
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  double oldest_wait_s(Clock::time_point now) const {
    return items_.empty() ? 0.0 : std::chrono::duration<double>(now - items_.front().enqueued).count();
  }
  // p-quantile (0..1) of the last kWindow waits, in seconds.
  double recent_wait_quantile(double q) const {
    if (waits_.empty()) return 0;
    auto sorted = waits_;
    std::sort(sorted.begin(), sorted.end());
    auto idx = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
    return sorted[std::min(idx, sorted.size() - 1)];
  }
  std::vector<Payload> take_all() {
    std::vector<Payload> out;
    for (auto& i : items_) out.push_back(std::move(i.payload));
    items_.clear();
    return out;
  }

  static constexpr std::size_t kWindow = 256;

 private:
  struct Item {
    std::uint64_t ticket;
    Clock::time_point enqueued;
    Payload payload;
  };
  void record_wait(Clock::duration d) {
    const double s = std::chrono::duration<double>(d).count();
    if (waits_.size() < kWindow) waits_.push_back(s);
    else waits_[wait_pos_++ % kWindow] = s;
  }
  std::size_t max_length_;
  std::uint64_t next_ticket_ = 1;
  std::deque<Item> items_;
  std::vector<double> waits_;
  std::size_t wait_pos_ = 0;
};

}  // namespace tidegate::gateway
