#pragma once
// A loopback HTTP/1.1 server for tests that stands in for what a component calls: the
// Kubernetes API, a replica's /metrics, a budget webhook, an embedding endpoint. Each
// connection has its own thread and keeps alive as long as the client does; handler calls are
// serialised and every request is recorded.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tidegate::testing {

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
  bool hang = false;         // never answer: hold the connection open until the server stops
  bool close_after = false;  // answer as if keeping alive, then close (an idle timeout that won the race)
};

class FakeHttpServer final {
 public:
  using Handler = std::function<FakeResponse(const FakeRequest&)>;

  explicit FakeHttpServer(Handler handler);
  ~FakeHttpServer();
  FakeHttpServer(const FakeHttpServer&) = delete;
  FakeHttpServer& operator=(const FakeHttpServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<FakeRequest> requests() const;
  int connections() const { return connections_; }  // accepted so far

 private:
  void accept_loop();
  void serve(int fd);

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  mutable std::mutex mu_;
  std::condition_variable stopped_;
  std::vector<FakeRequest> requests_;
  std::vector<int> open_fds_;
  std::vector<std::thread> threads_;  // one per connection
  std::mutex handler_mu_;
  std::thread acceptor_;
};

}  // namespace tidegate::testing
