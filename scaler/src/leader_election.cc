// The pure lease state machine (see leader_election.h), and the small helpers around it.
#include "tidegate/scaler/leader_election.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <ctime>

namespace tidegate::scaler {

LeaseMachine::LeaseMachine(std::string identity, double lease_duration_s, double renew_deadline_s)
    : identity_(std::move(identity)), lease_duration_s_(lease_duration_s), renew_deadline_s_(renew_deadline_s) {}

void LeaseMachine::become(bool leader) {
  if (leader == leader_) return;
  leader_ = leader;
  ++transitions_;
}

LeaseAction LeaseMachine::next(const std::optional<LeaseRecord>& observed, double now) {
  if (!observed) {
    // Deleted (or never made): whatever we believed, nobody holds it now.
    holder_.clear();
    seen_version_.clear();
    become(false);
    return LeaseAction::kCreate;
  }
  if (observed->resource_version != seen_version_ || seen_version_.empty()) {
    // A new record (a renewal, a takeover): its lease runs from now on our clock.
    seen_version_ = observed->resource_version;
    seen_at_ = now;
  }
  holder_ = observed->holder;
  if (holder_ == identity_) return LeaseAction::kRenew;  // also re-takes ours after a fenced step-down
  if (leader_) become(false);  // another name on it: someone won; stop at once
  if (holder_.empty()) return LeaseAction::kAcquire;  // released
  const double duration = observed->lease_duration_s > 0 ? observed->lease_duration_s : lease_duration_s_;
  return now - seen_at_ >= duration ? LeaseAction::kAcquire : LeaseAction::kStandBy;
}

LeaseRecord LeaseMachine::proposal(LeaseAction action, const std::optional<LeaseRecord>& observed,
                                   const std::string& micro_time_now) const {
  LeaseRecord r;
  r.holder = identity_;
  r.lease_duration_s = static_cast<int>(std::ceil(lease_duration_s_));
  r.acquire_time = r.renew_time = micro_time_now;
  if (!observed || action == LeaseAction::kCreate) return r;
  r.resource_version = observed->resource_version;  // the precondition: a 409 if it moved on
  r.transitions = observed->transitions;
  if (action == LeaseAction::kRenew && observed->holder == identity_) {
    if (!observed->acquire_time.empty()) r.acquire_time = observed->acquire_time;
  } else {
    ++r.transitions;  // the holder changes to us
  }
  return r;
}

void LeaseMachine::written(const LeaseRecord& stored, double sent_at) {
  holder_ = identity_;
  seen_version_ = stored.resource_version;
  seen_at_ = sent_at;
  renewed_at_ = sent_at;
  become(true);
}

void LeaseMachine::conflicted(double) { become(false); }

void LeaseMachine::failed(double) {}

void LeaseMachine::released() {
  become(false);
  holder_.clear();
}

bool LeaseMachine::may_actuate(double now) const { return leader_ && now - renewed_at_ < renew_deadline_s_; }

bool LeaseMachine::step_down_if_fenced(double now) {
  if (!leader_ || now - renewed_at_ < renew_deadline_s_) return false;
  become(false);
  return true;
}

std::string default_identity() {
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == 0) std::snprintf(host, sizeof host, "unknown");
  return std::string(host) + "_" + std::to_string(::getpid());
}

std::string micro_time(double unix_s) {
  double whole = std::floor(unix_s);
  long us = std::lround((unix_s - whole) * 1e6);
  if (us >= 1000000) whole += 1, us = 0;
  const std::time_t t = static_cast<std::time_t>(whole);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, us);
  return buf;
}

}  // namespace tidegate::scaler
