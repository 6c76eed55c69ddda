#include "virtual_pool.h"

#include <charconv>

namespace tidegate::replay::detail {
namespace {

std::string name_of(int id) { return "r" + std::to_string(id); }

}  // namespace

Replica* VirtualPool::find(const std::string& id) {
  int n = -1;
  if (id.size() < 2 || id[0] != 'r') return nullptr;
  auto [ptr, ec] = std::from_chars(id.data() + 1, id.data() + id.size(), n);
  if (ec != std::errc() || ptr != id.data() + id.size()) return nullptr;
  return fleet_.find(n);
}

bool VirtualPool::start(bool) {
  fleet_.start(now_);  // every start lands warm; the controller activates what it needs
  return true;
}

void VirtualPool::stop(const std::string& id) {
  auto* r = find(id);
  if (!r) return;
  if (r->in_flight > 0) {
    // A graceful stop, as the live actuators do: requests in flight finish first.
    fleet_.drain(*r, now_, {});
    r->for_warm = false;
    return;
  }
  fleet_.stop_id(r->id, now_);
}

scaler::PoolObservation VirtualPool::observe() {
  // The routed fleet is snapshotted once, before the controller's first step: observe() runs
  // twice per step, and re-snapshotting after activate() emptied the list would unroute
  // replicas the controller counts as active.
  if (!adopted_ && !snapshot_taken_) {
    snapshot_taken_ = true;
    for (const auto& r : fleet_.replicas())
      if (r->state == kActive) initial_.push_back(r->id);
  }
  scaler::PoolObservation obs;
  for (const auto& r : fleet_.replicas()) {
    scaler::ObservedReplica o;
    o.id = name_of(r->id);
    // Loaded: a promotion is only routing; a wake-up is not done until the tier's promotion.
    o.ready = !(r->state == kStarting && (!r->promoting || r->waking));
    obs.replicas.push_back(std::move(o));
  }
  return obs;
}

bool VirtualPool::park(const std::string& id) {
  auto* r = find(id);
  return r && fleet_.park(*r, now_);
}

bool VirtualPool::unpark(const std::string& id) {
  auto* r = find(id);
  return r && fleet_.wake(*r, now_);
}

void VirtualPool::activate(const std::string&, const std::string& replica_id, const scaler::Endpoint&) {
  auto* r = find(replica_id);
  if (!r) return;
  std::erase(initial_, r->id);
  fleet_.activate(*r, now_);
}

void VirtualPool::after_step() {
  if (adopted_) return;
  adopted_ = true;
  for (const int id : initial_) {
    auto* r = fleet_.find(id);
    if (!r || r->state != kActive) continue;
    fleet_.drain(*r, now_, [this, id] {
      if (auto* x = fleet_.find(id)) fleet_.unroute(*x, now_);
    });
  }
  initial_.clear();
  fleet_.retire_idle_draining(now_);
}

void VirtualPool::drain(const std::string&, const std::string& replica_id, std::function<void()> on_drained) {
  auto* r = find(replica_id);
  if (!r) {
    on_drained();
    return;
  }
  fleet_.drain(*r, now_, std::move(on_drained));
  fleet_.retire_idle_draining(now_);  // nothing in flight: drained at once
}

void VirtualPool::remove(const std::string&, const std::string& replica_id) {
  if (auto* r = find(replica_id)) fleet_.unroute(*r, now_);
}

}  // namespace tidegate::replay::detail
