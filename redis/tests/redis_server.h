#pragma once
// A real redis-server for tests: started on a free 127.0.0.1 port in a temporary directory,
// killed (SIGKILL), stopped (SIGSTOP) and restarted on the same port and data directory, so
// tests exercise outages and Redis's own persistence. Header-only; test executables only.
#include <hiredis/hiredis.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace tidegate::testing {

class RedisServer final {
 public:
  // Empty when redis-server is not on PATH (tests then skip, saying so).
  static std::string binary() {
    for (const char* dir : {"/usr/bin", "/usr/local/bin", "/usr/sbin"}) {
      const std::string p = std::string(dir) + "/redis-server";
      if (::access(p.c_str(), X_OK) == 0) return p;
    }
    return {};
  }

  // appendonly: every write is logged (appendfsync always) so a SIGKILL loses nothing.
  // requirepass: the server refuses clients that do not AUTH with it first.
  explicit RedisServer(bool appendonly = true, std::string requirepass = "")
      : appendonly_(appendonly), requirepass_(std::move(requirepass)) {
    char tmpl[] = "/tmp/tidegate-redis-XXXXXX";
    dir_ = ::mkdtemp(tmpl) ? tmpl : "";
    port_ = free_port();
  }
  ~RedisServer() {
    kill(SIGKILL);
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Starts it and waits (bounded) until it answers PING. False if it did not come up.
  bool start() {
    const auto bin = binary();
    if (bin.empty() || dir_.empty()) return false;
    std::vector<std::string> args{bin, "--port", std::to_string(port_), "--bind", "127.0.0.1", "--save", "",
                                  "--dir", dir_, "--appendonly", appendonly_ ? "yes" : "no",
                                  "--appendfsync", "always", "--daemonize", "no", "--loglevel", "warning",
                                  "--logfile", dir_ + "/redis.log"};
    if (!requirepass_.empty()) args.insert(args.end(), {"--requirepass", requirepass_});
    pid_ = ::fork();
    if (pid_ == 0) {
      // Dies with the test, and does not hold the test's stdout open if the test crashes.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int devnull = ::open("/dev/null", O_RDWR);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 500; ++i) {  // up to 5 s
      if (ping()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  void kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    if (sig == SIGKILL || sig == SIGTERM) {
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  void pause() { if (pid_ > 0) ::kill(pid_, SIGSTOP); }
  void resume() { if (pid_ > 0) ::kill(pid_, SIGCONT); }

  // A blocking command from the test itself (not the client under test); "" on failure.
  std::string call(const std::vector<std::string>& args) const {
    redisContext* c = connect();
    if (!c) return "";
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) argv.push_back(a.data()), lens.push_back(a.size());
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    std::string out;
    if (r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)) out.assign(r->str, r->len);
    if (r && r->type == REDIS_REPLY_INTEGER) out = std::to_string(r->integer);
    if (r) freeReplyObject(r);
    redisFree(c);
    return out;
  }
  bool ping() const { return call({"PING"}) == "PONG"; }

 private:
  redisContext* connect() const {
    timeval tv{0, 200000};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (!c || c->err) {
      if (c) redisFree(c);
      return nullptr;
    }
    redisSetTimeout(c, tv);
    if (!requirepass_.empty())
      if (auto* r = static_cast<redisReply*>(redisCommand(c, "AUTH %s", requirepass_.c_str()))) freeReplyObject(r);
    return c;
  }
  static int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
    ::close(fd);
    return port;
  }

  bool appendonly_;
  std::string requirepass_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace tidegate::testing

#define TIDEGATE_REQUIRE_REDIS_SERVER()                                                      \
  do {                                                                                       \
    if (::tidegate::testing::RedisServer::binary().empty())                                  \
      GTEST_SKIP() << "redis-server is not installed (apt-get install redis-server; "        \
                      "scripts/setup.sh installs it)";                                       \
  } while (0)
