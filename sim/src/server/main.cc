// tidegate-sim: a vLLM stand-in for tests, demos, benchmarks. See sim/README.md.
#include "config.h"
#include "session.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/strand.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// Accepts on the first loop and deals connections round-robin to one io_context per thread:
// a connection then lives on one thread, with no cross-thread hand-offs on its path.
class Listener final : public std::enable_shared_from_this<Listener> {
 public:
  Listener(std::vector<std::unique_ptr<net::io_context>>& loops, tcp::endpoint ep, tidegate::sim::ServerState& state)
      : loops_(loops), acceptor_(*loops[0]), state_(state) {
    acceptor_.open(ep.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(net::socket_base::max_listen_connections);
  }
  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  void accept() {
    auto& loop = *loops_[next_++ % loops_.size()];
    acceptor_.async_accept(net::make_strand(loop), [self = shared_from_this()](boost::system::error_code ec, tcp::socket s) {
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
  std::vector<std::unique_ptr<net::io_context>>& loops_;
  std::size_t next_ = 0;
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
  std::vector<std::unique_ptr<net::io_context>> loops;
  for (int i = 0; i < threads; ++i) loops.push_back(std::make_unique<net::io_context>(1));
  net::io_context& io = *loops[0];
  tidegate::sim::ServerState state(cfg, io);
  state.created = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
  std::shared_ptr<Listener> listener;
  try {
    listener = std::make_shared<Listener>(
        loops, tcp::endpoint(net::ip::make_address(cfg->host), static_cast<unsigned short>(cfg->port)), state);
  } catch (const std::exception& e) {
    std::cerr << "tidegate-sim: cannot listen on " << cfg->host << ":" << cfg->port << ": " << e.what() << "\n";
    return 1;
  }
  // First line of stdout: tests and scripts read the port from it when --port 0.
  std::printf("listening on %s:%u\n", cfg->host.c_str(), listener->port());
  std::fflush(stdout);
  listener->accept();

  // Idle loops must keep running until shutdown, connections or not.
  std::vector<net::executor_work_guard<net::io_context::executor_type>> guards;
  for (auto& l : loops) guards.push_back(net::make_work_guard(*l));
  net::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code, int) {
    listener->stop();
    for (auto& l : loops) l->stop();
  });
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&loops, i] { loops[static_cast<std::size_t>(i)]->run(); });
  io.run();
  for (auto& t : pool) t.join();
  return 0;
}
