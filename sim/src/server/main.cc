// tidegate-sim: a vLLM stand-in for tests, demos, benchmarks. See sim/README.md.
#include "config.h"
#include "session.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>
#include <vector>

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

class Listener final : public std::enable_shared_from_this<Listener> {
 public:
  Listener(net::io_context& io, tcp::endpoint ep, tidegate::sim::ServerState& state)
      : io_(io), acceptor_(io), state_(state) {
    acceptor_.open(ep.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(net::socket_base::max_listen_connections);
  }
  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  void accept() {
    acceptor_.async_accept(net::make_strand(io_), [self = shared_from_this()](boost::system::error_code ec, tcp::socket s) {
      if (!ec) std::make_shared<tidegate::sim::Session>(std::move(s), self->state_)->start();
      // Out of file descriptors and similar: keep accepting, the next one may succeed.
      if (ec != net::error::operation_aborted) self->accept();
    });
  }
  void stop() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
  }

 private:
  net::io_context& io_;
  tcp::acceptor acceptor_;
  tidegate::sim::ServerState& state_;
};

}  // namespace

int main(int argc, char** argv) {
  std::shared_ptr<const tidegate::sim::ServerConfig> cfg;
  try {
    cfg = tidegate::sim::parse_flags(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "tidegate-sim: " << e.what() << "\n\n" << tidegate::sim::usage_text();
    return 2;
  }
  if (!cfg) {
    std::cout << tidegate::sim::usage_text();
    return 0;
  }
  const int threads = std::max(1, cfg->threads);
  net::io_context io(threads);
  tidegate::sim::ServerState state(cfg, io);
  state.created = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
  std::shared_ptr<Listener> listener;
  try {
    listener = std::make_shared<Listener>(
        io, tcp::endpoint(net::ip::make_address(cfg->host), static_cast<unsigned short>(cfg->port)), state);
  } catch (const std::exception& e) {
    std::cerr << "tidegate-sim: cannot listen on " << cfg->host << ":" << cfg->port << ": " << e.what() << "\n";
    return 1;
  }
  // First line of stdout: tests and scripts read the port from it when --port 0.
  std::printf("listening on %s:%u\n", cfg->host.c_str(), listener->port());
  std::fflush(stdout);
  listener->accept();

  net::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code, int) {
    listener->stop();
    io.stop();
  });
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& t : pool) t.join();
  return 0;
}
