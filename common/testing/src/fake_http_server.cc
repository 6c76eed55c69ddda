// Blocking Beast on plain threads: a test's server should be the simplest thing that can be
// trusted, and thread-per-connection lets a client hold idle keep-alive connections open while
// it opens new ones. Stopping shuts the descriptors down, which ends every blocking call.
#include "tidegate/testing/fake_http_server.h"

#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <algorithm>
#include <cctype>

namespace tidegate::testing {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Sync operations only: nothing ever runs this context, and sockets on it are safe to use
// from the thread that owns each.
asio::io_context& io() {
  static asio::io_context ioc;
  return ioc;
}

}  // namespace

FakeHttpServer::FakeHttpServer(Handler handler) : handler_(std::move(handler)) {
  tcp::acceptor probe(io(), tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  port_ = probe.local_endpoint().port();
  listen_fd_ = probe.release();
  acceptor_ = std::thread([this] { accept_loop(); });
}

FakeHttpServer::~FakeHttpServer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  stopped_.notify_all();
  acceptor_.join();
  for (auto& t : threads_) t.join();
}

std::vector<FakeRequest> FakeHttpServer::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

void FakeHttpServer::accept_loop() {
  tcp::acceptor acceptor(io(), tcp::v4(), listen_fd_);
  for (;;) {
    beast::error_code ec;
    tcp::socket socket = acceptor.accept(ec);
    std::lock_guard lock(mu_);
    if (stop_) return;
    if (ec) continue;
    ++connections_;
    const int fd = socket.release();
    open_fds_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

void FakeHttpServer::serve(int fd) {
  tcp::socket socket(io(), tcp::v4(), fd);
  // Leaves the list before the socket closes the descriptor: a number the destructor shuts
  // down must still be ours, not one the system has handed out again.
  struct Forget {
    FakeHttpServer& server;
    int fd;
    ~Forget() {
      std::lock_guard lock(server.mu_);
      std::erase(server.open_fds_, fd);
    }
  } forget{*this, fd};
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> req;
    beast::error_code ec;
    http::read(socket, buffer, req, ec);
    if (ec) return;
    FakeRequest r{std::string(req.method_string()), std::string(req.target()), {}, std::move(req.body())};
    for (const auto& f : req) {
      std::string name(f.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = std::string(f.value());
    }
    {
      std::lock_guard lock(mu_);
      requests_.push_back(r);
    }
    FakeResponse answer;
    {
      std::lock_guard lock(handler_mu_);
      answer = handler_(r);
    }
    if (answer.hang) {
      std::unique_lock lock(mu_);
      stopped_.wait(lock, [this] { return stop_.load(); });
      return;
    }
    http::response<http::string_body> res{static_cast<http::status>(answer.status), req.version()};
    res.set(http::field::content_type, answer.content_type);
    res.body() = std::move(answer.body);
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    http::write(socket, res, ec);
    if (ec || !res.keep_alive() || answer.close_after) return;
  }
}

}  // namespace tidegate::testing
