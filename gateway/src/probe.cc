// Active health probes: GET <health.path> on every replica each interval. A 200 marks the
// replica healthy (re-admitting an ejected one); failures count towards ejection.
#include <boost/beast/http.hpp>

#include "impl.h"
#include "tidegate/common/log.h"

namespace tidegate::gateway {
namespace http = beast::http;
namespace {

// One probe of one replica. Its steps run on the plain socket under a deadline that the probe
// loop's tick enforces (the data path's mechanism: the tick closes the socket, the step fails).
struct Probe : std::enable_shared_from_this<Probe> {
  Probe(net::io_context& ioc, std::shared_ptr<ReplicaPool> p, ReplicaPtr r, HealthConfig h)
      : socket(ioc), pool(std::move(p)), replica(std::move(r)), health(std::move(h)) {}

  void run() {
    resolve_address(replica->host, replica->port, replica->address, socket.get_executor(),
                    [self = shared_from_this()](beast::error_code ec, Endpoints endpoints) {
                      if (ec || !endpoints || endpoints->empty()) return self->done(false);
                      self->connect(std::move(endpoints));
                    });
  }
  void connect(Endpoints endpoints) {
    // One deadline for the connect, whichever address answers; once it fired the rest are skipped.
    deadline.arm(health.timeout_s);
    net::async_connect(socket, *endpoints, [self = shared_from_this()](beast::error_code, const tcp::endpoint&) {
      return !self->deadline.fired();
    }, [self = shared_from_this(), endpoints](beast::error_code ec, const tcp::endpoint&) {
      if (ec) {
        self->replica->address.forget();
        return self->done(false);
      }
      self->req = {http::verb::get, self->health.path, 11};
      self->req.set(http::field::host, self->replica->authority);
      self->req.set(http::field::user_agent, "tidegate-probe");
      self->req.keep_alive(false);
      self->deadline.arm(self->health.timeout_s);
      http::async_write(self->socket, self->req, [self](beast::error_code ec, std::size_t) {
        if (ec) return self->done(false);
        self->deadline.arm(self->health.timeout_s);
        http::async_read(self->socket, self->buffer, self->res, [self](beast::error_code ec, std::size_t) {
          self->done(!ec && self->res.result_int() == 200);
        });
      });
    });
  }
  // From the probe loop's tick.
  void on_tick(Clock::time_point now) {
    if (!deadline.expired(now)) return;
    beast::error_code ignored;
    socket.close(ignored);
  }
  void done(bool ok) {
    deadline.disarm();
    pool->report_probe(replica->id, ok);
    beast::error_code ec;
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }

  tcp::socket socket;
  StepDeadline deadline;  // enforced by the probe loop's tick
  std::shared_ptr<ReplicaPool> pool;
  ReplicaPtr replica;
  HealthConfig health;
  http::request<http::empty_body> req;
  http::response<http::string_body> res;
  beast::flat_buffer buffer;
};

struct ProbeLoop : std::enable_shared_from_this<ProbeLoop> {
  std::weak_ptr<Gateway::Impl> impl;
  net::io_context* ioc = nullptr;
  std::unordered_map<std::string, Clock::time_point> next_due;
  std::vector<std::weak_ptr<Probe>> in_flight;  // held by their own steps; swept each tick

  void tick() {
    auto strong = impl.lock();
    if (!strong || strong->stopped || !strong->probe_timer) return;
    const auto now = Clock::now();
    for (const auto& pool : strong->upstreams.pools()) {
      const auto h = pool->health_config();
      if (h.interval_s <= 0) continue;
      auto& due = next_due[pool->model()];
      if (now < due) continue;
      due = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(h.interval_s));
      for (const auto& r : pool->replicas()) {
        auto probe = std::make_shared<Probe>(*ioc, pool, r, h);
        in_flight.push_back(probe);
        probe->run();
      }
    }
    // The probes' deadlines.
    std::erase_if(in_flight, [now](const std::weak_ptr<Probe>& w) {
      auto p = w.lock();
      if (p) p->on_tick(now);
      return !p;
    });
    // Tick often; each model keeps its own interval.
    strong->probe_timer->expires_after(std::chrono::milliseconds(50));
    strong->probe_timer->async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->tick();
    });
  }
};

}  // namespace

void start_health_probes(const std::shared_ptr<Gateway::Impl>& impl) {
  auto& ioc = impl->workers[0]->ioc;
  impl->probe_timer = std::make_unique<net::steady_timer>(ioc);
  auto loop = std::make_shared<ProbeLoop>();
  loop->impl = impl;
  loop->ioc = &ioc;
  net::post(ioc, [loop] { loop->tick(); });
}

}  // namespace tidegate::gateway
