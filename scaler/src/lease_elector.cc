// The Lease elector: a thread that reads the Lease every retry_period, asks the LeaseMachine
// what to do and writes it. The HTTP calls happen here, never on the gateway's event loops;
// the fence (may_actuate) is evaluated against the clock when asked, so a renewal stuck in a
// hung call still stops the scaler at renew_deadline.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "electors.h"
#include "kubernetes_lease.h"
#include "tidegate/common/log.h"

namespace tidegate::scaler {
namespace {

double mono_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double wall_s() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

class KubernetesElector final : public LeaderElector {
 public:
  explicit KubernetesElector(LeaderElectionConfig c)
      : config_(std::move(c)), client_(config_), machine_(config_.identity, config_.lease_duration_s,
                                                           config_.renew_deadline_s) {}
  ~KubernetesElector() override { stop(); }

  void start() override {
    std::lock_guard lock(mu_);
    if (thread_.joinable()) return;
    stopping_ = false;
    thread_ = std::thread([this] { run(); });
  }

  void stop() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    bool was_leader;
    {
      std::lock_guard lock(mu_);
      was_leader = machine_.leader();
      machine_.released();  // no actuation from here on, before the lease is given up
    }
    if (!was_leader) return;
    // Hand over at once rather than make the successor wait out the lease (a rolling restart).
    const auto read = client_.get();
    if (read.outcome != LeaseCall::Outcome::kOk || read.record->holder != config_.identity) return;
    const auto r = client_.release(*read.record, micro_time(wall_s()));
    log::info("scaler.leader_released", {{"lease", config_.lease_name}, {"identity", config_.identity},
                                         {"ok", r.outcome == LeaseCall::Outcome::kOk}});
  }

  bool may_actuate() const override {
    std::lock_guard lock(mu_);
    return machine_.may_actuate(mono_s());
  }

  ElectionStatus status() const override {
    std::lock_guard lock(mu_);
    ElectionStatus s;
    s.leader = machine_.leader();
    s.may_actuate = machine_.may_actuate(mono_s());
    s.holder = machine_.holder();
    s.transitions = machine_.transitions();
    s.last_error = last_error_;
    return s;
  }

  std::string identity() const override { return config_.identity; }

 private:
  void run() {
    while (true) {
      round();
      std::unique_lock lock(mu_);
      if (wake_.wait_for(lock, std::chrono::duration<double>(config_.retry_period_s), [this] { return stopping_; }))
        return;
    }
  }

  // Logs a change of role once, from whichever step caused it. Called with mu_ held.
  void note_role(bool was_leader, const char* why) {
    if (machine_.leader() == was_leader) return;
    if (machine_.leader())
      log::info("scaler.leader_elected", {{"lease", config_.lease_name}, {"identity", config_.identity}});
    else
      log::warn("scaler.leader_lost", {{"lease", config_.lease_name}, {"identity", config_.identity},
                                       {"why", why}, {"holder", machine_.holder()}, {"last_error", last_error_}});
  }

  void round() {
    {
      std::lock_guard lock(mu_);
      const bool was = machine_.leader();
      machine_.step_down_if_fenced(mono_s());
      note_role(was, "no successful renewal within renew_deadline");
    }
    const auto read = client_.get();
    std::optional<LeaseRecord> observed;
    LeaseAction action;
    LeaseRecord proposal;
    {
      std::lock_guard lock(mu_);
      if (read.outcome == LeaseCall::Outcome::kError || read.outcome == LeaseCall::Outcome::kConflict) {
        machine_.failed(mono_s());
        last_error_ = read.error;
        return;
      }
      if (read.outcome == LeaseCall::Outcome::kOk) observed = read.record;
      const bool was = machine_.leader();
      action = machine_.next(observed, mono_s());
      note_role(was, "the lease names another holder");
      if (action == LeaseAction::kStandBy) return;
      proposal = machine_.proposal(action, observed, micro_time(wall_s()));
    }
    const double sent = mono_s();
    const auto wrote = action == LeaseAction::kCreate ? client_.create(proposal) : client_.update(proposal);
    std::lock_guard lock(mu_);
    const bool was = machine_.leader();
    switch (wrote.outcome) {
      case LeaseCall::Outcome::kOk:
        machine_.written(*wrote.record, sent);
        last_error_.clear();
        break;
      case LeaseCall::Outcome::kConflict:
        machine_.conflicted(mono_s());
        last_error_ = wrote.error;
        break;
      default:
        machine_.failed(mono_s());
        last_error_ = wrote.error.empty() ? "lease not found on update" : wrote.error;
        break;
    }
    note_role(was, "another candidate wrote the lease first (409)");
  }

  LeaderElectionConfig config_;
  KubernetesLeaseClient client_;
  mutable std::mutex mu_;
  LeaseMachine machine_;
  std::string last_error_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<LeaderElector> make_kubernetes_elector(LeaderElectionConfig config) {
  return std::make_unique<KubernetesElector>(std::move(config));
}

std::unique_ptr<LeaderElector> make_leader_elector(const LeaderElectionConfig& config) {
  LeaderElectionConfig c = config;
  if (c.identity.empty()) c.identity = default_identity();
  switch (c.kind) {
    case ElectionKind::kNone: return nullptr;
    case ElectionKind::kKubernetes: return make_kubernetes_elector(resolve_lease_config(std::move(c)));
    case ElectionKind::kFile: return make_file_lock_elector(std::move(c));
  }
  return nullptr;
}

}  // namespace tidegate::scaler
