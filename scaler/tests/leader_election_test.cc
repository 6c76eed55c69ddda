// The lease state machine (expiry, renewal, conflict, step-down, clock at the boundaries, and a
// simulated partition checked for two actors at once), the leader_election config, and the
// flock elector (a holder killed with SIGKILL loses the lock to the kernel).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "electors.h"
#include "tidegate/common/config_error.h"
#include "tidegate/scaler/config.h"
#include "tidegate/scaler/leader_election.h"

namespace tidegate::scaler {
namespace {

LeaseRecord held_by(const std::string& holder, const std::string& rv, int duration = 15, int transitions = 0) {
  LeaseRecord r;
  r.holder = holder;
  r.lease_duration_s = duration;
  r.resource_version = rv;
  r.transitions = transitions;
  r.acquire_time = "2026-01-01T00:00:00.000000Z";
  return r;
}

// A stored record as the API server would return it after a write.
LeaseRecord stored(LeaseRecord r, const std::string& rv) {
  r.resource_version = rv;
  return r;
}

TEST(LeaseMachine, CreatesAMissingLeaseAndLeadsOnceWritten) {
  LeaseMachine m("a", 15, 10);
  EXPECT_EQ(m.next(std::nullopt, 100), LeaseAction::kCreate);
  const auto p = m.proposal(LeaseAction::kCreate, std::nullopt, "T1");
  EXPECT_EQ(p.holder, "a");
  EXPECT_EQ(p.lease_duration_s, 15);
  EXPECT_EQ(p.transitions, 0);
  EXPECT_TRUE(p.resource_version.empty());
  EXPECT_EQ(p.acquire_time, "T1");
  EXPECT_FALSE(m.may_actuate(100)) << "not before the write succeeded";
  m.written(stored(p, "1"), 100);
  EXPECT_TRUE(m.leader());
  EXPECT_TRUE(m.may_actuate(100.5));
  EXPECT_EQ(m.transitions(), 1u);
}

TEST(LeaseMachine, RenewalKeepsAcquireTimeAndTransitionsAndCarriesTheVersion) {
  LeaseMachine m("a", 15, 10);
  const auto current = held_by("a", "7", 15, 3);
  EXPECT_EQ(m.next(current, 5), LeaseAction::kRenew);
  const auto p = m.proposal(LeaseAction::kRenew, current, "T2");
  EXPECT_EQ(p.resource_version, "7") << "optimistic concurrency: the read version is the precondition";
  EXPECT_EQ(p.transitions, 3);
  EXPECT_EQ(p.acquire_time, current.acquire_time);
  EXPECT_EQ(p.renew_time, "T2");
}

TEST(LeaseMachine, AnotherHoldersLeaseExpiresOnOurClockFromWhenWeSawIt) {
  LeaseMachine m("b", 15, 10);
  const auto a1 = held_by("a", "1", 15, 4);
  EXPECT_EQ(m.next(a1, 100), LeaseAction::kStandBy);
  EXPECT_EQ(m.holder(), "a");
  EXPECT_EQ(m.next(a1, 114.999), LeaseAction::kStandBy);
  EXPECT_EQ(m.next(a1, 115.0), LeaseAction::kAcquire) << "exactly lease_duration after first seeing it";
  const auto p = m.proposal(LeaseAction::kAcquire, a1, "T3");
  EXPECT_EQ(p.holder, "b");
  EXPECT_EQ(p.transitions, 5) << "the holder changes";
  EXPECT_EQ(p.resource_version, "1");
  EXPECT_EQ(p.acquire_time, "T3");
}

TEST(LeaseMachine, ARenewalSeenRestartsTheWait) {
  LeaseMachine m("b", 15, 10);
  EXPECT_EQ(m.next(held_by("a", "1"), 100), LeaseAction::kStandBy);
  EXPECT_EQ(m.next(held_by("a", "2"), 110), LeaseAction::kStandBy);
  EXPECT_EQ(m.next(held_by("a", "2"), 116), LeaseAction::kStandBy) << "16 s after the first, 6 after the renewal";
  EXPECT_EQ(m.next(held_by("a", "2"), 125), LeaseAction::kAcquire);
}

TEST(LeaseMachine, TheRecordsOwnDurationRulesAndAReleasedLeaseIsFreeAtOnce) {
  LeaseMachine m("b", 15, 10);
  EXPECT_EQ(m.next(held_by("a", "1", 3), 0), LeaseAction::kStandBy);
  EXPECT_EQ(m.next(held_by("a", "1", 3), 3), LeaseAction::kAcquire) << "the holder's leaseDurationSeconds";
  EXPECT_EQ(m.next(held_by("", "2", 1), 3.1), LeaseAction::kAcquire) << "released: no wait";
}

TEST(LeaseMachine, FenceStopsActuationAtRenewDeadlineBeforeOthersMayAcquire) {
  LeaseMachine m("a", 15, 10);
  m.next(std::nullopt, 0);
  m.written(stored(m.proposal(LeaseAction::kCreate, std::nullopt, "T"), "1"), 10);
  m.failed(12);
  EXPECT_TRUE(m.may_actuate(19.999));
  EXPECT_FALSE(m.may_actuate(20.0)) << "renew_deadline after the last renewal sent";
  EXPECT_TRUE(m.leader()) << "in name until it steps down";
  EXPECT_FALSE(m.step_down_if_fenced(19.9));
  EXPECT_TRUE(m.step_down_if_fenced(20.0));
  EXPECT_FALSE(m.leader());
  EXPECT_EQ(m.transitions(), 2u);
  // The API comes back and the lease still names us: renew, lead again.
  EXPECT_EQ(m.next(held_by("a", "1"), 21), LeaseAction::kRenew);
  m.written(held_by("a", "2"), 21);
  EXPECT_TRUE(m.may_actuate(21));
}

TEST(LeaseMachine, AConflictOrAnotherNameOnTheLeaseEndsLeadershipAtOnce) {
  LeaseMachine m("a", 15, 10);
  m.next(std::nullopt, 0);
  m.written(held_by("a", "1"), 0);
  m.conflicted(1);
  EXPECT_FALSE(m.leader());
  EXPECT_FALSE(m.may_actuate(1));

  LeaseMachine n("a", 15, 10);
  n.next(std::nullopt, 0);
  n.written(held_by("a", "1"), 0);
  EXPECT_EQ(n.next(held_by("c", "9"), 2), LeaseAction::kStandBy);
  EXPECT_FALSE(n.may_actuate(2)) << "well within its own deadline, but c holds it now";
  EXPECT_EQ(n.holder(), "c");

  LeaseMachine d("a", 15, 10);
  d.next(std::nullopt, 0);
  d.written(held_by("a", "1"), 0);
  EXPECT_EQ(d.next(std::nullopt, 1), LeaseAction::kCreate) << "deleted: create it again";
  EXPECT_FALSE(d.may_actuate(1));
}

TEST(LeaseMachine, ReleaseStopsAtOnce) {
  LeaseMachine m("a", 15, 10);
  m.next(std::nullopt, 0);
  m.written(held_by("a", "1"), 0);
  m.released();
  EXPECT_FALSE(m.may_actuate(0.1));
  EXPECT_EQ(m.holder(), "");
}

// Two candidates over one simulated API (versioned compare-and-set), rounds every 2 s at
// random phases, each round seeing a random request latency; A is cut off from the API for a
// while. Checked every 10 ms: never two actuating, and B takes over.
TEST(LeaseMachine, SimulatedPartitionNeverHasTwoActors) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> phase(0, 2), latency(0.001, 0.3);
    std::optional<LeaseRecord> store;
    int version = 0;
    LeaseMachine a("a", 15, 10), b("b", 15, 10);
    struct Actor {
      LeaseMachine* m;
      double next_round;
    };
    Actor actors[] = {{&a, phase(rng)}, {&b, phase(rng) + 0.5}};
    const double cut_from = 30 + phase(rng), cut_to = 70;
    bool b_led = false;
    for (double t = 0; t < 100; t += 0.01) {
      for (auto& actor : actors) {
        if (t < actor.next_round) continue;
        actor.next_round += 2;
        LeaseMachine& m = *actor.m;
        m.step_down_if_fenced(t);
        const bool cut = &m == &a && t >= cut_from && t < cut_to;
        if (cut) {
          m.failed(t);
          continue;
        }
        const auto action = m.next(store, t);
        if (action == LeaseAction::kStandBy) continue;
        auto p = m.proposal(action, store, "T");
        const double sent = t - latency(rng);  // the request left a moment before it landed
        const bool ok = action == LeaseAction::kCreate ? !store : store && store->resource_version == p.resource_version;
        if (!ok) {
          m.conflicted(t);
          continue;
        }
        p.resource_version = std::to_string(++version);
        store = p;
        m.written(p, sent);
      }
      ASSERT_FALSE(a.may_actuate(t) && b.may_actuate(t)) << "seed " << seed << " t " << t;
      b_led = b_led || b.may_actuate(t);
    }
    EXPECT_TRUE(b_led) << "seed " << seed << ": B never took over from the partitioned A";
  }
}

TEST(LeaseMachine, MicroTimeIsRfc3339WithMicroseconds) {
  EXPECT_EQ(micro_time(0), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(micro_time(1764769562.1234567), "2025-12-03T13:46:02.123457Z");
  EXPECT_EQ(micro_time(59.9999996), "1970-01-01T00:01:00.000000Z");
}

YAML::Node section(const std::string& election) {
  return YAML::Load(R"(scaler:
  pools:
    - model: m
      actuator: {kind: kubernetes, api_server: "http://127.0.0.1:9", namespace: llm, token: t0k, deployment: d}
  leader_election:
)" + election)["scaler"];
}

std::string error_of(const std::string& election) {
  try {
    parse_scaler_config(section(election), "scaler");
  } catch (const ConfigError& e) {
    return e.key() + " line " + std::to_string(e.line()) + ": " + e.what();
  }
  return "no error";
}

TEST(LeaderElectionConfig, ParsesAndTakesTheApiSettingsOfTheKubernetesPool) {
  const auto cfg = parse_scaler_config(
      section("    {kind: kubernetes, lease_name: gw, lease_duration: 6s, renew_deadline: 4s, retry_period: 1s}\n"),
      "scaler");
  const auto& le = cfg->leader_election;
  EXPECT_EQ(le.kind, ElectionKind::kKubernetes);
  EXPECT_EQ(le.lease_name, "gw");
  EXPECT_DOUBLE_EQ(le.lease_duration_s, 6);
  EXPECT_DOUBLE_EQ(le.renew_deadline_s, 4);
  EXPECT_DOUBLE_EQ(le.retry_period_s, 1);
  EXPECT_EQ(le.api_server, "http://127.0.0.1:9");
  EXPECT_EQ(le.ns, "llm");
  EXPECT_EQ(le.token, "t0k");
  EXPECT_EQ(parse_scaler_config(YAML::Load("pools: []"), "scaler")->leader_election.kind, ElectionKind::kNone);
}

TEST(LeaderElectionConfig, BadInputNamesTheKeyAndLine) {
  EXPECT_EQ(error_of("    {kind: kubernetes, lease_duration: 10s, renew_deadline: 10s}\n").substr(0, 45),
            "scaler.leader_election.renew_deadline line 6:");
  EXPECT_NE(error_of("    kind: kubernetes\n    renew_deadline: 20s\n").find("renew_deadline line 7"), std::string::npos);
  EXPECT_NE(error_of("    {kind: kubernetes, retry_period: 12s}\n").find("retry_period"), std::string::npos);
  EXPECT_NE(error_of("    {kind: zookeeper}\n").find("scaler.leader_election.kind line 6"), std::string::npos);
  EXPECT_NE(error_of("    {kind: file}\n").find("leader_election.lock_file"), std::string::npos);
  EXPECT_NE(error_of("    {lease_name: x}\n").find("leader_election.kind"), std::string::npos);
  EXPECT_NE(error_of("    {kind: kubernetes, lease_durration: 5s}\n").find("lease_durration"), std::string::npos);
  EXPECT_NE(error_of("    {kind: kubernetes, request_timeout: 10s}\n").find("request_timeout"), std::string::npos);
}

std::unique_ptr<LeaderElector> file_elector(const std::filesystem::path& path, const std::string& identity) {
  LeaderElectionConfig c;
  c.kind = ElectionKind::kFile;
  c.lock_file = path.string();
  c.retry_period_s = 0.05;
  c.identity = identity;
  auto e = make_file_lock_elector(c);
  e->start();
  return e;
}

bool becomes_leader(LeaderElector& e) {
  for (int i = 0; i < 100 && !e.may_actuate(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return e.may_actuate();
}

TEST(FileLockElector, OneHolderAtATimeAndTheNextTakesOverOnStop) {
  const auto path = std::filesystem::temp_directory_path() / ("tidegate-lock-" + std::to_string(::getpid()));
  auto a = file_elector(path, "first");
  ASSERT_TRUE(becomes_leader(*a));
  auto b = file_elector(path, "second");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(b->may_actuate());
  EXPECT_EQ(b->status().holder, "first");
  a->stop();
  EXPECT_FALSE(a->may_actuate());
  EXPECT_TRUE(becomes_leader(*b));
  EXPECT_EQ(b->status().holder, "second");
  EXPECT_EQ(b->status().transitions, 1u);
  b->stop();
  std::filesystem::remove(path);
}

TEST(FileLockElector, TheKernelReleasesTheLockOfAKilledHolder) {
  const auto path = std::filesystem::temp_directory_path() / ("tidegate-lock-kill-" + std::to_string(::getpid()));
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the other gateway: take the lock, say so, wait to be killed
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0 || ::write(fd, "doomed\n", 7) != 7) ::_exit(1);
    if (::write(ready[1], "x", 1) != 1) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  char byte;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  auto e = file_elector(path, "survivor");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(e->may_actuate());
  EXPECT_EQ(e->status().holder, "doomed");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(becomes_leader(*e));
  e->stop();
  ::close(ready[0]);
  ::close(ready[1]);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tidegate::scaler
