#include <fcntl.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <prometheus/registry.h>

#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdio>

#include "client_connection.h"
#include "tidegate/common/log.h"

namespace tidegate::gateway {

Gateway::Impl::Impl(std::shared_ptr<const GatewayConfig> c)
    : config_(std::move(c)), registry(std::make_shared<prometheus::Registry>()), stats(*registry), upstreams(*config_) {}

const ApiKey* Gateway::Impl::authenticate(const GatewayConfig& c, std::string_view bearer) const {
  // Every key is compared, match or not, so the time taken does not depend on which matched.
  const ApiKey* found = nullptr;
  for (const auto& k : c.api_keys) {
    const bool eq = constant_time_equal(bearer, k.key);
    if (eq && !found) found = &k;
  }
  return bearer.empty() ? nullptr : found;
}

std::string Gateway::Impl::next_request_id() {
  // A keyed mix of a counter: unique per process, unpredictable enough for log correlation,
  // and no lock on the hot path (the random seed is drawn once).
  const std::uint64_t n = request_counter++;
  std::uint64_t z = request_id_seed + n * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  // 16 hex digits of the mix, then the counter's low 32 bits (8 digits).
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(24, '0');
  for (int i = 15; i >= 0; --i, z >>= 4) out[static_cast<std::size_t>(i)] = kHex[z & 0xf];
  std::uint64_t low = n & 0xffffffffu;
  for (int i = 23; i >= 16; --i, low >>= 4) out[static_cast<std::size_t>(i)] = kHex[low & 0xf];
  return out;
}

namespace {

// boost::json writes every double in exponent form ("duration_ms":9.45222714E2), which log
// search, jq and spreadsheets read badly. The access log's doubles are all milliseconds: they
// are written as plain decimals to the microsecond (945.223), trailing zeros trimmed.
void append_ms(std::string& out, double ms) {
  char buf[400];  // fixed notation of the largest double and 3 decimals fits
  const auto r = std::isfinite(ms) ? std::to_chars(buf, buf + sizeof buf, ms, std::chars_format::fixed, 3)
                                   : std::to_chars_result{buf, std::errc::invalid_argument};
  if (r.ec != std::errc()) {
    out += "null";
    return;
  }
  std::string_view s(buf, static_cast<std::size_t>(r.ptr - buf));
  while (s.back() == '0') s.remove_suffix(1);
  if (s.back() == '.') s.remove_suffix(1);
  out += s == "-0" ? std::string_view("0") : s;
}

// One flat JSON object (the access log has no nested values) with doubles through append_ms.
std::string access_line(const boost::json::object& o) {
  std::string out = "{";
  for (const auto& kv : o) {
    if (out.size() > 1) out += ',';
    out += boost::json::serialize(kv.key());
    out += ':';
    if (kv.value().is_double()) append_ms(out, kv.value().get_double());
    else out += boost::json::serialize(kv.value());
  }
  out += '}';
  return out;
}

}  // namespace

void Gateway::Impl::access_log(const RequestContext& ctx, std::string_view method, const GatewayConfig& config) {
  const double rate = config.access_log.sample_rate;
  const bool error = ctx.status >= 400 || !ctx.reason.empty();
  if (!error && rate <= 0.0) return;
  if (!error && rate < 1.0) {
    std::lock_guard lock(rng_mu);
    if (std::uniform_real_distribution<double>(0, 1)(rng) >= rate) return;
  }
  boost::json::object o;
  o["ts"] = log::iso8601_now();
  o["request_id"] = ctx.request_id;
  o["method"] = method;
  o["path"] = ctx.path;
  o["model"] = ctx.model;
  o["tenant"] = ctx.tenant;
  if (!ctx.key_name.empty()) o["key"] = ctx.key_name;  // the key's name, never the secret
  o["status"] = ctx.status;
  o["duration_ms"] = ctx.timings.total_s * 1000.0;
  o["ttfb_ms"] = ctx.timings.ttfb_s >= 0 ? ctx.timings.ttfb_s * 1000.0 : -1.0;
  o["queue_ms"] = ctx.timings.queue_s * 1000.0;
  o["upstream"] = ctx.replica_id;
  if (!ctx.route_reason.empty()) {
    o["route"] = ctx.route_reason;
    o["prefix_blocks"] = ctx.prefix_blocks_matched;
  }
  o["bytes"] = ctx.bytes_sent;
  o["stream"] = ctx.stream;
  if (ctx.prompt_tokens >= 0) o["prompt_tokens"] = ctx.prompt_tokens;
  if (ctx.completion_tokens >= 0) o["completion_tokens"] = ctx.completion_tokens;
  o["reason"] = ctx.reason;
  // Filters' figures (cost_usd, cache.status, ...) ride along; the gateway does not interpret them.
  for (const auto& [k, v] : ctx.attributes) o[k] = v;
  log::write_line(access_fd, access_line(o));
}

void Gateway::Impl::close_idle_connections() {
  for (auto& w : workers) {
    net::post(w->ioc, [&w = *w] {
      std::vector<std::shared_ptr<ClientConnection>> live;
      {
        std::lock_guard lock(w.connections_mu);
        for (auto& [_, weak] : w.connections)
          if (auto s = weak.lock()) live.push_back(std::move(s));
      }
      for (auto& s : live) s->close_if_idle();
    });
  }
}

namespace {

// A connection over limits.max_connections gets a 503 and a clean close. Whatever request it
// already sent is read and dropped until the client closes or a second passes: closing with
// unread bytes makes the kernel answer with a reset, which can destroy the 503 before the
// client reads it. Runs on the acceptor's loop; at most kMaxWaiting wait at once, so a flood
// beyond the limit is closed at once instead of piling up here.
class TurnedAway final : public std::enable_shared_from_this<TurnedAway> {
 public:
  static void answer(const std::shared_ptr<Gateway::Impl>& impl, tcp::socket socket) {
    if (impl->turned_away >= kMaxWaiting) {
      beast::error_code ignored;
      net::write(socket, busy(), ignored);
      return void(socket.close(ignored));
    }
    ++impl->turned_away;
    auto self = std::make_shared<TurnedAway>(impl, std::move(socket));
    net::async_write(self->socket_, busy(),
                     [self](beast::error_code ec, std::size_t) { self->on_written(ec); });
  }

  TurnedAway(std::shared_ptr<Gateway::Impl> impl, tcp::socket socket)
      : impl_(std::move(impl)), socket_(std::move(socket)), timer_(socket_.get_executor()) {}
  ~TurnedAway() {
    beast::error_code ignored;
    socket_.close(ignored);
    --impl_->turned_away;
  }

 private:
  static constexpr std::size_t kMaxWaiting = 256;
  static constexpr std::string_view kBody =
      R"({"error":{"message":"too many open connections","type":"server_error","param":null,"code":"max_connections"}})";
  static constexpr std::string_view kHead =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
      "Content-Length: 109\r\n\r\n";
  static_assert(kBody.size() == 109, "Content-Length in kHead must match kBody");
  // Canned (no allocation while flooded), but the table's row all the same.
  static_assert(spec(Failure::kMaxConnections).status == 503 && spec(Failure::kMaxConnections).code == "max_connections" &&
                spec(Failure::kMaxConnections).type == "server_error");
  static std::array<net::const_buffer, 2> busy() { return {net::buffer(kHead), net::buffer(kBody)}; }

  void on_written(beast::error_code ec) {
    if (!ec) socket_.shutdown(tcp::socket::shutdown_send, ec);  // FIN after the 503
    if (ec) return;
    timer_.expires_after(std::chrono::seconds(1));
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      beast::error_code ignored;
      if (!ec) self->socket_.cancel(ignored);  // ends the pending read, and with it the wait
    });
    drain();
  }

  void drain() {
    socket_.async_read_some(net::buffer(sink_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (!ec) return self->drain();
      self->timer_.cancel();  // client closed (or the second passed): the last handler frees us
    });
  }

  std::shared_ptr<Gateway::Impl> impl_;
  tcp::socket socket_;
  net::steady_timer timer_;
  std::array<char, 2048> sink_;
};

void do_accept(const std::shared_ptr<Gateway::Impl>& impl) {
  if (!impl->acceptor || !impl->acceptor->is_open()) return;
  auto& worker = *impl->workers[impl->next_worker++ % impl->workers.size()];
  // Accepted on the acceptor's own loop, then handed to the worker as a bare descriptor: the
  // workers' loops skip Asio's per-socket locking (Worker::ioc), so a socket must be
  // registered with, and only ever touched by, the one loop that owns it.
  impl->acceptor->async_accept([impl, &worker](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;
    if (!ec) {
      const auto cfg = impl->config();
      if (impl->open_connections >= cfg->limits.max_connections) {
        impl->stats.local_reply(std::string(spec(Failure::kMaxConnections).code));
        TurnedAway::answer(impl, std::move(socket));
      } else {
        socket.set_option(tcp::no_delay(true), ec);
        const auto protocol = socket.local_endpoint(ec).protocol();
        const int fd = ec ? -1 : socket.release(ec);
        if (!ec && fd >= 0) {
          net::post(worker.ioc, [impl, &worker, protocol, fd] {
            Socket s(worker.ioc);
            beast::error_code assign_ec;
            s.assign(protocol, fd, assign_ec);
            if (assign_ec) return void(::close(fd));
            std::make_shared<ClientConnection>(impl, worker, std::move(s))->start();
          });
        }
      }
    }
    do_accept(impl);
  });
}

void arm_anchor(Worker& w) {
  w.anchor.expires_after(Worker::kTick);
  w.anchor.async_wait([&w](beast::error_code ec) {
    if (ec) return;
    {
      std::lock_guard lock(w.connections_mu);
      for (auto& [_, weak] : w.connections)
        if (auto s = weak.lock()) w.ticking.push_back(std::move(s));
    }
    const auto now = coarse_now();  // the clock the deadlines were set on
    for (auto& s : w.ticking) s->on_tick(now);
    w.ticking.clear();  // outside the lock: the last reference may end a connection here
    if (++w.ticks % 10 == 0) w.conns.prune(now);
    arm_anchor(w);
  });
}

}  // namespace

Gateway::Gateway(std::shared_ptr<const GatewayConfig> config) : impl_(std::make_shared<Impl>(std::move(config))) {}

Gateway::~Gateway() {
  stop();
  wait();
  impl_->upstreams.on_new_replica(nullptr);  // its executor goes with the workers
  for (auto& w : impl_->workers) w->door->shut();  // a filter answering late posts nothing
  // Pending handlers hold connections, which hold the Impl: destroy them while it is alive.
  impl_->acceptor.reset();
  impl_->probe_timer.reset();
  impl_->workers.clear();
  if (impl_->access_fd > 2) ::close(impl_->access_fd);
}

void Gateway::add_filter(std::shared_ptr<RequestFilter> filter) {
  if (filter->reads_request_headers()) impl_->copy_request_headers = true;
  if (filter->reads_request_body()) impl_->parse_request_body = true;
  if (filter->runs_before_forward()) impl_->before_forward.push_back(filter.get());
  impl_->filters.push_back(std::move(filter));
}

void Gateway::add_route(std::string method, std::string path_prefix, RouteHandler handler, RouteAccess access) {
  impl_->routes.push_back(Route{std::move(method), std::move(path_prefix), std::move(handler), access});
}

prometheus::Registry& Gateway::registry() { return *impl_->registry; }
scaler::RoutingTarget& Gateway::routing() { return impl_->upstreams; }
const scaler::SignalSource& Gateway::signals() const { return impl_->upstreams; }
void Gateway::on_placement(PlacementSink sink) { impl_->placement_sink = std::move(sink); }
bool Gateway::learn_placement(const RoutePlacement& p) {
  const auto pool = impl_->upstreams.find(p.model);
  return pool && pool->learn(p.replica_id, p.blocks, p.session);
}
std::uint16_t Gateway::port() const { return impl_->bound_port; }
std::shared_ptr<const GatewayConfig> Gateway::config() const { return impl_->config(); }

void Gateway::start() {
  const auto cfg = impl_->config();
  if (!cfg->access_log.path.empty()) {
    impl_->access_fd = ::open(cfg->access_log.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (impl_->access_fd < 0) throw std::runtime_error("cannot open access log " + cfg->access_log.path);
  }
  int threads = cfg->threads > 0 ? cfg->threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 0; i < threads; ++i) impl_->workers.push_back(std::make_unique<Worker>());
  auto& ioc0 = impl_->workers[0]->ioc;
  beast::error_code ec;
  const auto addr = net::ip::make_address(cfg->listen_host, ec);
  if (ec) throw std::runtime_error("listen: bad address " + cfg->listen_host);
  tcp::endpoint ep(addr, cfg->listen_port);
  impl_->acceptor = std::make_unique<tcp::acceptor>(ioc0);
  impl_->acceptor->open(ep.protocol());
  impl_->acceptor->set_option(net::socket_base::reuse_address(true));
  impl_->acceptor->bind(ep, ec);
  if (ec) throw std::runtime_error("listen: cannot bind " + cfg->listen_host + ":" + std::to_string(cfg->listen_port) + ": " + ec.message());
  impl_->acceptor->listen(net::socket_base::max_listen_connections);
  impl_->bound_port = impl_->acceptor->local_endpoint().port();
  do_accept(impl_);
  // A replica's address is looked up when it is added (config, reload, scaler), off the event
  // loops (Asio's resolver thread), so the first request to it finds it known; a failed
  // connect forgets it and the next one looks again.
  impl_->upstreams.on_new_replica([ex = ioc0.get_executor()](const ReplicaPtr& r) {
    // A name that does not resolve now is said once, here; requests to the replica look it up
    // again and count their connect failures as usual.
    resolve_address(r->host, r->port, r->address, ex, [id = r->id, host = r->host](beast::error_code ec, Endpoints) {
      if (ec) log::warn("gateway.replica_unresolved", {{"replica", id}, {"host", host}, {"error", ec.message()}});
    });
  });
  start_health_probes(impl_);
  for (auto& w : impl_->workers) {
    arm_anchor(*w);
    w->thread = std::thread([&ioc = w->ioc] {
      auto guard = net::make_work_guard(ioc);
      ioc.run();
    });
  }
  log::info("gateway.listening", {{"host", cfg->listen_host}, {"port", impl_->bound_port}, {"threads", threads}});
}

void Gateway::reload(std::shared_ptr<const GatewayConfig> config) {
  impl_->upstreams.reconcile(*config);
  {
    std::lock_guard lock(impl_->config_mu);
    impl_->config_ = std::move(config);
    impl_->config_version.fetch_add(1, std::memory_order_release);
  }
  log::info("gateway.reloaded", {{"models", impl_->config()->models.size()}, {"api_keys", impl_->config()->api_keys.size()}});
}

void Gateway::drain() {
  if (impl_->workers.empty()) return;
  impl_->draining = true;
  net::post(impl_->workers[0]->ioc, [impl = impl_] {
    beast::error_code ec;
    if (impl->acceptor) impl->acceptor->close(ec);
  });
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(impl_->config()->timeouts.drain_s));
  log::info("gateway.draining", {{"open_connections", impl_->open_connections.load()}});
  while (impl_->open_connections > 0 && Clock::now() < deadline) {
    impl_->close_idle_connections();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  log::info("gateway.drained", {{"open_connections", impl_->open_connections.load()}});
  stop();
}

void Gateway::stop() {
  if (impl_->stopped.exchange(true)) return;
  for (auto& w : impl_->workers) w->ioc.stop();
  std::lock_guard lock(impl_->stop_mu);
  impl_->stop_cv.notify_all();
}

void Gateway::wait() {
  {
    std::unique_lock lock(impl_->stop_mu);
    impl_->stop_cv.wait(lock, [&] { return impl_->stopped.load(); });
  }
  for (auto& w : impl_->workers)
    if (w->thread.joinable() && w->thread.get_id() != std::this_thread::get_id()) w->thread.join();
}

}  // namespace tidegate::gateway
