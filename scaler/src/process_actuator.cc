// Replicas as child processes. Each child gets its own process group so a stop reaches a
// wrapper script's children too; only our own pids are ever waited for (the gateway may
// have other children).
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "http_client.h"
#include "tidegate/common/log.h"
#include "tidegate/scaler/actuators.h"

extern char** environ;

namespace tidegate::scaler {

std::string substitute(const std::string& text, const std::map<std::string, std::string>& values) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == '{') {
      const auto close = text.find('}', i);
      if (close != std::string::npos) {
        const auto it = values.find(text.substr(i + 1, close - i - 1));
        if (it != values.end()) {
          out += it->second;
          i = close + 1;
          continue;
        }
      }
    }
    out += text[i++];
  }
  return out;
}

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool port_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// fork+exec rather than posix_spawn: the child asks for SIGTERM when its parent thread
// dies (PR_SET_PDEATHSIG), so a crashed gateway does not leave GPUs held by orphans.
// Between fork and exec only async-signal-safe calls. Returns 0 or the exec errno.
int spawn(char* const* argv, char* const* envp, const std::string& log_path, pid_t* pid_out) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return errno;
  const int out = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: a stop reaches a wrapper's children too
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (in >= 0) ::dup2(in, STDIN_FILENO);
    if (out >= 0) ::dup2(out, STDOUT_FILENO), ::dup2(out, STDERR_FILENO);
    ::execvpe(argv[0], argv, envp);
    const int err = errno;
    [[maybe_unused]] auto n = ::write(pipefd[1], &err, sizeof err);
    ::_exit(127);
  }
  const int fork_errno = errno;
  if (pid > 0) ::setpgid(pid, pid);  // also here, so a stop right after start finds the group
  ::close(pipefd[1]);
  if (out >= 0) ::close(out);
  if (in >= 0) ::close(in);
  if (pid < 0) {
    ::close(pipefd[0]);
    return fork_errno;
  }
  int err = 0;
  ssize_t n;
  do n = ::read(pipefd[0], &err, sizeof err);
  while (n < 0 && errno == EINTR);
  ::close(pipefd[0]);
  if (n == static_cast<ssize_t>(sizeof err)) {
    ::waitpid(pid, nullptr, 0);
    return err;
  }
  *pid_out = pid;
  return 0;
}

struct Child {
  std::string id;
  pid_t pid = -1;
  int port = 0;
  std::vector<int> gpus;
  bool ready = false;
  bool exited = false;
  std::string detail;
  double kill_at = 0;  // terminating children: SIGKILL after this
};

class ProcessActuator final : public Actuator {
 public:
  explicit ProcessActuator(ProcessActuatorConfig c) : config_(std::move(c)) {}

  ~ProcessActuator() override {
    for (auto& c : children_) terminate(std::move(c));
    children_.clear();
    const double deadline = now_s() + config_.stop_grace_s;
    while (!stopping_.empty() && now_s() < deadline) {
      reap_stopping(now_s());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (auto& c : stopping_) c.kill_at = 0;
    while (!stopping_.empty()) {
      reap_stopping(now_s());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  std::string_view kind() const override { return "process"; }
  bool elastic() const override { return true; }

  bool start(bool) override {
    Child c;
    c.id = config_.model + "-" + std::to_string(++counter_);
    c.port = pick_port();
    if (c.port == 0) return fail("no free port in " + std::to_string(config_.port_from) + "-" + std::to_string(config_.port_to));
    c.gpus = pick_gpus();
    std::string gpu_list;
    for (int g : c.gpus) {
      if (!gpu_list.empty()) gpu_list += ',';
      gpu_list += std::to_string(g);
    }
    const std::map<std::string, std::string> values{
        {"port", std::to_string(c.port)}, {"gpu", gpu_list}, {"model", config_.model}, {"replica", c.id}};

    std::vector<std::string> args;
    for (const auto& a : config_.command) args.push_back(substitute(a, values));
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string entry(*e);
      if (!config_.env.count(entry.substr(0, entry.find('=')))) env.push_back(entry);
    }
    for (const auto& [k, v] : config_.env) env.push_back(k + "=" + substitute(v, values));
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);

    const std::string log_path = config_.log_dir.empty() ? "/dev/null" : config_.log_dir + "/" + c.id + ".log";
    const int rc = spawn(argv.data(), envp.data(), log_path, &c.pid);
    if (rc != 0) return fail("spawn " + args[0] + ": " + std::strerror(rc));
    log::info("scaler.process_started",
              {{"replica", c.id}, {"pid", c.pid}, {"port", c.port}, {"gpu", gpu_list}, {"cmd", args[0]}});
    children_.push_back(std::move(c));
    return true;
  }

  void stop(const std::string& id) override {
    for (auto it = children_.begin(); it != children_.end(); ++it) {
      if (it->id != id) continue;
      terminate(std::move(*it));
      children_.erase(it);
      return;
    }
  }

  PoolObservation observe() override {
    const double now = now_s();
    reap_stopping(now);
    PoolObservation obs;
    for (auto& c : children_) {
      if (!c.exited) {
        int status = 0;
        if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
          c.exited = true;
          c.detail = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                         : "exited with status " + std::to_string(WEXITSTATUS(status));
        }
      }
      if (!c.exited && !c.ready) {
        const auto r = http::get("http://" + config_.host + ":" + std::to_string(c.port) + config_.health_path,
                                 config_.health_timeout_s);
        c.ready = r.ok() && r.status == 200;
      }
      obs.replicas.push_back({c.id, {config_.host, static_cast<std::uint16_t>(c.port)}, c.ready, c.exited, c.detail});
    }
    std::erase_if(children_, [](const Child& c) { return c.exited; });
    return obs;
  }

  ActuatorStats stats() const override { return stats_; }

  bool park(const std::string& id) override { return engine_call(id, config_.sleep_path, false); }
  bool unpark(const std::string& id) override { return engine_call(id, config_.wake_path, true); }

 private:
  // POSTs to a child's engine; a wake-up makes it unready until its health check passes again.
  bool engine_call(const std::string& id, const std::string& path, bool wake) {
    if (path.empty()) return false;
    for (auto& c : children_) {
      if (c.id != id || c.exited) continue;
      const auto r = http::request("POST", "http://" + config_.host + ":" + std::to_string(c.port) + path, {}, "",
                                   config_.sleep_timeout_s);
      if (!r.ok() || r.status / 100 != 2)
        return fail(c.id + ": POST " + path + " -> " + (r.ok() ? std::to_string(r.status) : r.error));
      if (wake) c.ready = false;
      return true;
    }
    return false;
  }

  bool fail(const std::string& why) {
    ++stats_.errors;
    stats_.last_error = why;
    log::error("scaler.process_start_failed", {{"model", config_.model}, {"error", why}});
    return false;
  }

  void terminate(Child c) {
    if (c.exited) return;
    ::kill(-c.pid, SIGTERM);
    c.kill_at = now_s() + config_.stop_grace_s;
    stopping_.push_back(std::move(c));
  }

  void reap_stopping(double now) {
    std::erase_if(stopping_, [&](Child& c) {
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
        ::kill(-c.pid, SIGKILL);  // leftovers of the group, if any
        return true;
      }
      if (now >= c.kill_at) ::kill(-c.pid, SIGKILL);
      return false;
    });
  }

  int pick_port() {
    const int span = config_.port_to - config_.port_from + 1;
    for (int i = 0; i < span; ++i) {
      const int port = config_.port_from + (next_port_ + i) % span;
      bool used = false;
      for (const auto& c : children_) used = used || c.port == port;
      for (const auto& c : stopping_) used = used || c.port == port;
      if (!used && port_free(port)) {
        next_port_ = (next_port_ + i + 1) % span;
        return port;
      }
    }
    return 0;
  }

  // Least-loaded devices first, so replicas spread over the GPUs.
  std::vector<int> pick_gpus() {
    if (config_.gpus.empty()) return {};
    std::vector<std::pair<int, int>> load;
    for (int g : config_.gpus) {
      int n = 0;
      for (const auto& c : children_)
        for (int cg : c.gpus) n += cg == g;
      load.emplace_back(n, g);
    }
    std::stable_sort(load.begin(), load.end(), [](auto& a, auto& b) { return a.first < b.first; });
    std::vector<int> out;
    for (int i = 0; i < config_.gpus_per_replica && i < static_cast<int>(load.size()); ++i) out.push_back(load[i].second);
    return out;
  }

  ProcessActuatorConfig config_;
  std::vector<Child> children_;
  std::vector<Child> stopping_;
  ActuatorStats stats_;
  std::uint64_t counter_ = 0;
  int next_port_ = 0;
};

class StaticActuator final : public Actuator {
 public:
  explicit StaticActuator(StaticActuatorConfig c) : config_(std::move(c)) {}
  std::string_view kind() const override { return "static"; }
  bool elastic() const override { return false; }
  bool start(bool) override { return false; }
  void stop(const std::string&) override {}
  // The gateway's own health checks decide routing; the scaler only hands the list over.
  PoolObservation observe() override {
    PoolObservation obs;
    for (const auto& e : config_.endpoints) obs.replicas.push_back({e.host + ":" + std::to_string(e.port), e, true, false, {}});
    return obs;
  }
  ActuatorStats stats() const override { return {}; }

 private:
  StaticActuatorConfig config_;
};

}  // namespace

std::unique_ptr<Actuator> make_process_actuator(ProcessActuatorConfig config) {
  return std::make_unique<ProcessActuator>(std::move(config));
}
std::unique_ptr<Actuator> make_static_actuator(StaticActuatorConfig config) {
  return std::make_unique<StaticActuator>(std::move(config));
}

}  // namespace tidegate::scaler
