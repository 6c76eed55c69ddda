#pragma once
// A loopback HTTP/1.1 server for tests (fake Kubernetes API, fake /metrics). One request
// per connection, handled in order on one thread; every request is recorded.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tidegate::scaler::testing {

struct FakeRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

struct FakeResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

class FakeHttpServer {
 public:
  using Handler = std::function<FakeResponse(const FakeRequest&)>;

  explicit FakeHttpServer(Handler handler) : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(fd_, 16);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeHttpServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<FakeRequest> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      handle(c);
      ::close(c);
    }
  }

  static bool read_more(int c, std::string& buf) {
    pollfd p{c, POLLIN, 0};
    if (::poll(&p, 1, 2000) <= 0) return false;
    char tmp[4096];
    const ssize_t n = ::read(c, tmp, sizeof tmp);
    if (n <= 0) return false;
    buf.append(tmp, static_cast<std::size_t>(n));
    return true;
  }

  void handle(int c) {
    std::string buf;
    std::size_t head_end;
    while ((head_end = buf.find("\r\n\r\n")) == std::string::npos)
      if (!read_more(c, buf)) return;
    FakeRequest req;
    const std::string head = buf.substr(0, head_end);
    std::size_t line_end = head.find("\r\n");
    const std::string first = head.substr(0, line_end);
    const auto sp1 = first.find(' '), sp2 = first.rfind(' ');
    req.method = first.substr(0, sp1);
    req.target = first.substr(sp1 + 1, sp2 - sp1 - 1);
    while (line_end != std::string::npos && line_end < head.size()) {
      const auto next = head.find("\r\n", line_end + 2);
      const std::string line = head.substr(line_end + 2, next == std::string::npos ? std::string::npos : next - line_end - 2);
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        std::string value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        req.headers[name] = value;
      }
      line_end = next;
    }
    const std::size_t length = req.headers.count("content-length") ? std::stoul(req.headers["content-length"]) : 0;
    req.body = buf.substr(head_end + 4);
    while (req.body.size() < length) {
      std::string more;
      if (!read_more(c, more)) return;
      req.body += more;
    }
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(req);
    }
    const FakeResponse res = handler_(req);
    const std::string out = "HTTP/1.1 " + std::to_string(res.status) + " X\r\nContent-Type: " + res.content_type +
                            "\r\nContent-Length: " + std::to_string(res.body.size()) + "\r\nConnection: close\r\n\r\n" +
                            res.body;
    std::size_t sent = 0;
    while (sent < out.size()) {
      const ssize_t n = ::write(c, out.data() + sent, out.size() - sent);
      if (n <= 0) return;
      sent += static_cast<std::size_t>(n);
    }
  }

  Handler handler_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<FakeRequest> requests_;
};

}  // namespace tidegate::scaler::testing
