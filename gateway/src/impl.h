#pragma once
// Private state shared by the listener, client connections and probes. One Impl per Gateway.
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>

#include <time.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "attempt_buffers.h"
#include "openai.h"
#include "stats.h"
#include "tidegate/gateway/gateway.h"
#include "upstreams.h"

namespace tidegate::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;
// Connections name their loop's executor type rather than the type-erased any_io_executor:
// every async step copies, tracks and destroys the handler's executor, and the erased one
// costs an indirect call for each.
using Executor = net::io_context::executor_type;
using Socket = net::basic_stream_socket<tcp, Executor>;
using Clock = std::chrono::steady_clock;

class ClientConnection;

// Loop deadlines and idle ages have the tick's resolution (100 ms), so they read the coarse
// monotonic clock: it is the same clock as steady_clock, updated every jiffy, and reading it
// skips the TSC (several reads a request). Deadlines add one jiffy so that none fires early.
inline std::chrono::steady_clock::time_point coarse_now() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::steady_clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}
inline std::chrono::steady_clock::duration coarse_resolution() {
  static const auto res = [] {
    timespec ts{};
    ::clock_getres(CLOCK_MONOTONIC_COARSE, &ts);
    return std::chrono::steady_clock::duration(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
  }();
  return res;
}

// A body up to this is copied behind its head and both go out in one send(2), cheaper in the
// kernel than a two-entry sendmsg(2): client responses and upstream requests alike.
inline constexpr std::size_t kCopiedBodyBytes = 16 * 1024;

// Config durations are seconds as double; timers want steady_clock durations.
inline std::chrono::steady_clock::duration secs(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

// The deadline of one async step on a socket, the data path's one deadline mechanism: the
// step arms it just before it starts and disarms it when it completes; a periodic tick asks
// expired(now) and, when it says so (once), closes the step's socket, so the step completes
// with an error that mapped() reads as a timeout.
class StepDeadline final {
 public:
  void arm(double seconds) {
    fired_ = false;
    at_ = coarse_now() + secs(seconds) + coarse_resolution();
  }
  void disarm() { at_ = Clock::time_point::max(); }
  bool expired(Clock::time_point now) {
    if (now < at_) return false;
    at_ = Clock::time_point::max();
    fired_ = true;
    return true;
  }
  bool fired() const { return fired_; }
  beast::error_code mapped(beast::error_code ec) const { return ec && fired_ ? beast::error::timeout : ec; }

 private:
  Clock::time_point at_ = Clock::time_point::max();
  bool fired_ = false;
};

// Idle keep-alive connections to replicas, owned by one event loop (no locking).
class ConnPool final {
 public:
  // Sockets travel by pointer: moving an Asio socket costs more than the pointer.
  std::unique_ptr<Socket> take(std::uint64_t replica_serial);
  void put(const ReplicaPtr& replica, std::unique_ptr<Socket> conn);
  // Closes connections idle past kMaxIdle and every connection of a replica that no pool
  // holds any more (a reload or the scaler removed it): nothing would ever take them, and
  // each was a descriptor held for good (the soak found them, CLOSE_WAIT once the replica
  // went). Called about once a second by the worker's tick.
  void prune(std::chrono::steady_clock::time_point now);
  static constexpr std::size_t kMaxIdlePerReplica = 256;
  // Longer than the keep-alive timeouts engines' HTTP servers use (uvicorn, under vLLM and
  // SGLang: 5 s), so a connection this old is nearly always closed at the other end already.
  static constexpr std::chrono::seconds kMaxIdle{10};
  // Servers close idle keep-alive connections after seconds (uvicorn: 5 s), not sooner: a
  // connection idle for less than this is used without the peek (one syscall per request
  // saved). One the server did close anyway fails on first use and is retried fresh.
  static constexpr std::chrono::milliseconds kTrustIdleFor{1000};
  // A replica that closed a connection inside that window (llama.cpp closes after every
  // stream while its head says keep-alive) has every reuse peeked from then on.
  void distrust(std::uint64_t replica_serial) { idle_[replica_serial].peek_always = true; }

 private:
  struct Idle {
    std::chrono::steady_clock::time_point since;
    std::unique_ptr<Socket> conn;
  };
  struct Slot {
    std::vector<Idle> idle;
    std::weak_ptr<Replica> replica;  // expired: removed from every pool, its connections go
    bool peek_always = false;
  };
  std::unordered_map<std::uint64_t, Slot> idle_;
};

// Member order matters at teardown: pooled connections go first, then the io_context
// (whose pending handlers own connections that unregister themselves under connections_mu,
// and attempts that give their buffers back).
// The way back onto a worker's loop from another thread (a filter's or a route's answer). Shut
// once the worker's thread has stopped, so that an answer arriving after the gateway is gone
// posts nothing to a loop that no longer exists.
class LoopDoor final {
 public:
  explicit LoopDoor(net::io_context& ioc) : ex_(ioc.get_executor()) {}
  template <class Handler>
  void post(Handler&& handler) {
    std::lock_guard lock(mu_);
    if (open_) net::post(ex_, std::forward<Handler>(handler));
  }
  void shut() {
    std::lock_guard lock(mu_);
    open_ = false;
  }

 private:
  std::mutex mu_;
  bool open_ = true;
  net::io_context::executor_type ex_;
};

struct Worker {
  std::mutex connections_mu;
  std::unordered_map<ClientConnection*, std::weak_ptr<ClientConnection>> connections;
  AttemptBufferPool attempt_buffers;
  std::thread thread;
  // Sockets here are used by this loop's thread only (accepted ones are handed over as bare
  // descriptors, pooled upstream connections stay with their loop), so Asio's per-socket
  // locks are off; handlers may still be posted from any thread.
  net::io_context ioc{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  // Re-armed every tick so that it always expires first. Asio reprograms the loop's kernel
  // timer (one timerfd_settime) whenever a new timer becomes the earliest, which a lone
  // connection's per-operation timeouts otherwise do four times a request.
  net::steady_timer anchor{ioc};
  std::uint64_t ticks = 0;
  // The tick also visits every client connection (ClientConnection::on_tick): it enforces the
  // deadline of every step, the client's and the upstream attempt's (the one deadline
  // mechanism of the data path), so it is their resolution, and starts the client hang-up
  // watch of requests still waiting on a replica, so a request answered within a tick never
  // pays for one.
  static constexpr std::chrono::milliseconds kTick{100};
  std::vector<std::shared_ptr<ClientConnection>> ticking;  // the tick's scratch
  ConnPool conns;
  std::shared_ptr<LoopDoor> door = std::make_shared<LoopDoor>(ioc);
  // Connections waiting for an answer from another thread are held here, on their loop, and
  // not by the callback that carries the answer: that callback may run, or be dropped, on its
  // own thread after the workers are gone, and the last reference to a connection must never
  // go there (its socket belongs to this loop). Loop thread only. Declared after `ioc`, so a
  // connection still waiting at teardown ends before its loop does.
  std::uint64_t hold(std::shared_ptr<ClientConnection> conn) {
    awaiting.emplace(++last_hold, std::move(conn));
    return last_hold;
  }
  std::shared_ptr<ClientConnection> let_go(std::uint64_t id) {
    auto node = awaiting.extract(id);
    return node ? std::move(node.mapped()) : nullptr;
  }
  std::unordered_map<std::uint64_t, std::shared_ptr<ClientConnection>> awaiting;
  std::uint64_t last_hold = 0;
};

struct Route {
  std::string method;
  std::string prefix;
  RouteHandler handler;
  RouteAccess access;
};

struct Gateway::Impl : std::enable_shared_from_this<Gateway::Impl> {
  explicit Impl(std::shared_ptr<const GatewayConfig> c);

  std::shared_ptr<const GatewayConfig> config() const {
    std::lock_guard lock(config_mu);
    return config_;
  }
  // Refreshes a connection's snapshot only when a reload happened since it was taken: the
  // common case is one relaxed load instead of a lock and two reference-count updates.
  void refresh(std::shared_ptr<const GatewayConfig>& snapshot, std::uint64_t& version) const {
    const auto now = config_version.load(std::memory_order_acquire);
    if (snapshot && version == now) return;
    std::lock_guard lock(config_mu);
    snapshot = config_;
    version = config_version.load(std::memory_order_relaxed);
  }
  // Resolves a bearer key to its entry (constant time over all keys). nullptr: rejected.
  const ApiKey* authenticate(const GatewayConfig& c, std::string_view bearer) const;
  // One JSON line, sampled (errors always); `config` is the request's snapshot.
  void access_log(const RequestContext& ctx, std::string_view method, const GatewayConfig& config);
  void close_idle_connections();
  std::string next_request_id();

  mutable std::mutex config_mu;
  std::shared_ptr<const GatewayConfig> config_;
  std::atomic<std::uint64_t> config_version{0};  // bumped (under config_mu) by each reload
  std::shared_ptr<prometheus::Registry> registry;
  GatewayStats stats;
  Upstreams upstreams;
  std::vector<std::shared_ptr<RequestFilter>> filters;
  std::vector<RequestFilter*> before_forward;  // those of `filters` whose pre_forward runs, in order
  bool copy_request_headers = false;  // some filter reads RequestContext::request_headers
  bool parse_request_body = false;    // some filter reads RequestContext::body
  std::vector<Route> routes;
  PlacementSink placement_sink;  // set before start(); empty: no other gateway listens
  std::vector<std::unique_ptr<Worker>> workers;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::unique_ptr<net::steady_timer> probe_timer;
  std::atomic<std::size_t> next_worker{0};
  std::atomic<std::size_t> open_connections{0};
  std::size_t turned_away = 0;  // connections over the limit still being answered; acceptor loop only
  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};
  std::uint16_t bound_port = 0;
  int access_fd = 2;
  std::mutex rng_mu;
  std::mt19937_64 rng{std::random_device{}()};
  std::atomic<std::uint64_t> request_counter{0};
  const std::uint64_t request_id_seed = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
  std::mutex stop_mu;
  std::condition_variable stop_cv;
};

// Active health probes; runs on worker 0.
void start_health_probes(const std::shared_ptr<Gateway::Impl>& impl);

}  // namespace tidegate::gateway
