#pragma once
// An actuator that acts only while the leader elector allows it. Observation always passes
// through, so a follower keeps routing the replicas the leader runs and keeps its policy warm;
// what changes the fleet (start, stop, park, unpark) is checked against the fence at the
// moment of the call, not once per tick, so a leader that loses the lease mid-tick stops there.
// (The Scaler's fence also requires the tick to have decided as the leader: a lease won
// mid-tick does not turn a follower's decision into starts.)
#include <functional>
#include <memory>

#include "tidegate/scaler/actuator.h"

namespace tidegate::scaler {

class FencedActuator final : public Actuator {
 public:
  // `follower_view`, if set, replaces what a follower observes (the leader's published view,
  // where the replicas are the leader's own processes); the inner actuator is still asked.
  FencedActuator(std::unique_ptr<Actuator> inner, std::function<bool()> may_actuate,
                 std::function<PoolObservation()> follower_view = {})
      : inner_(std::move(inner)), may_actuate_(std::move(may_actuate)), follower_view_(std::move(follower_view)) {}

  std::string_view kind() const override { return inner_->kind(); }
  bool elastic() const override { return inner_->elastic(); }
  // A follower's start is a no-op that reports success: the controller keeps replicas only from
  // what observe() lists, so a start that did nothing leaves its state as it was, and no
  // "start_failed" fault is reported every tick for the leader's job.
  bool start(bool for_warm_pool) override {
    if (!may_actuate_()) return true;
    return inner_->start(for_warm_pool);
  }
  void stop(const std::string& id) override {
    if (!may_actuate_()) return;
    inner_->stop(id);
  }
  PoolObservation observe() override {
    auto obs = inner_->observe();
    if (follower_view_ && !may_actuate_()) obs = follower_view_();
    live_ = 0;
    for (const auto& r : obs.replicas) live_ += !r.exited;
    last_ = obs;
    return obs;
  }
  ActuatorStats stats() const override { return inner_->stats(); }
  bool park(const std::string& id) override { return may_actuate_() && inner_->park(id); }
  bool unpark(const std::string& id) override { return may_actuate_() && inner_->unpark(id); }

  // Replicas the last observe() listed alive: a follower routes all of them.
  int live() const { return live_; }
  const PoolObservation& last() const { return last_; }

 private:
  std::unique_ptr<Actuator> inner_;
  std::function<bool()> may_actuate_;
  std::function<PoolObservation()> follower_view_;
  int live_ = 0;
  PoolObservation last_;
};

}  // namespace tidegate::scaler
