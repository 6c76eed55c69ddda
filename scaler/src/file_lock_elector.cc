// The one-host elector: an exclusive flock(2) on a lock file. The holder is the leader for as
// long as its process lives; the kernel drops the lock when the process dies (kill -9
// included), so there is no lease to expire and nothing to fence. The holder writes its
// identity into the file so followers can show who leads.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "electors.h"
#include "tidegate/common/log.h"

namespace tidegate::scaler {
namespace {

class FileLockElector final : public LeaderElector {
 public:
  explicit FileLockElector(LeaderElectionConfig c) : config_(std::move(c)) {
    if (config_.lock_file.empty()) throw std::invalid_argument("scaler.leader_election.lock_file: required with kind file");
    // CLOEXEC: replicas the process actuator spawns must not inherit (and so keep) the lock.
    fd_ = ::open(config_.lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw std::invalid_argument("scaler.leader_election.lock_file: cannot open '" + config_.lock_file +
                                  "': " + std::strerror(errno));
  }
  ~FileLockElector() override {
    stop();
    if (fd_ >= 0) ::close(fd_);
  }

  void start() override {
    std::lock_guard lock(mu_);
    if (thread_.joinable()) return;
    stopping_ = false;
    thread_ = std::thread([this] {
      while (true) {
        attempt();
        std::unique_lock lock(mu_);
        if (wake_.wait_for(lock, std::chrono::duration<double>(config_.retry_period_s), [this] { return stopping_; }))
          return;
      }
    });
  }

  void stop() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard lock(mu_);
    if (!holding_) return;
    holding_ = false;  // stop actuating first, then let go
    ++transitions_;
    ::flock(fd_, LOCK_UN);
    log::info("scaler.leader_released", {{"lock_file", config_.lock_file}, {"identity", config_.identity}});
  }

  bool may_actuate() const override {
    std::lock_guard lock(mu_);
    return holding_;
  }

  ElectionStatus status() const override {
    std::lock_guard lock(mu_);
    ElectionStatus s;
    s.leader = s.may_actuate = holding_;
    s.holder = holder_;
    s.transitions = transitions_;
    s.last_error = last_error_;
    return s;
  }

  std::string identity() const override { return config_.identity; }

 private:
  void attempt() {
    std::lock_guard lock(mu_);
    if (holding_) return;  // held until the process ends or stop()
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
      holding_ = true;
      ++transitions_;
      holder_ = config_.identity;
      last_error_.clear();
      const std::string text = config_.identity + "\n";
      if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
        last_error_ = std::string("writing the holder: ") + std::strerror(errno);
      log::info("scaler.leader_elected", {{"lock_file", config_.lock_file}, {"identity", config_.identity}});
      return;
    }
    if (errno != EWOULDBLOCK) last_error_ = std::string("flock: ") + std::strerror(errno);
    char buf[512];
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    holder_ = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
    while (!holder_.empty() && (holder_.back() == '\n' || holder_.back() == '\r')) holder_.pop_back();
  }

  LeaderElectionConfig config_;
  int fd_ = -1;
  mutable std::mutex mu_;
  bool holding_ = false;
  std::string holder_;
  std::string last_error_;
  std::uint64_t transitions_ = 0;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<LeaderElector> make_file_lock_elector(LeaderElectionConfig config) {
  return std::make_unique<FileLockElector>(std::move(config));
}

}  // namespace tidegate::scaler
