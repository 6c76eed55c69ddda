// Active health probes: GET <health.path> on every replica each interval. A 200 marks the
// replica healthy (re-admitting an ejected one); failures count towards ejection.
#include <boost/beast/http.hpp>

#include "impl.h"
#include "tidegate/common/log.h"

namespace tidegate::gateway {
namespace http = beast::http;
namespace {

struct Probe : std::enable_shared_from_this<Probe> {
  Probe(net::io_context& ioc, std::shared_ptr<ReplicaPool> p, ReplicaPtr r, HealthConfig h)
      : stream(ioc), pool(std::move(p)), replica(std::move(r)), health(std::move(h)) {}

  void run() {
    resolve_address(replica->host, replica->port, replica->address, stream.get_executor(),
                    [self = shared_from_this()](beast::error_code ec, Endpoints endpoints) {
                      if (ec) return self->done(false);
                      self->connect(std::move(endpoints));
                    });
  }
  void connect(Endpoints endpoints) {
    stream.expires_after(timeout());
    stream.async_connect(*endpoints, [self = shared_from_this(), endpoints](beast::error_code ec, const tcp::endpoint&) {
      if (ec) {
        self->replica->address.forget();
        return self->done(false);
      }
      self->req = {http::verb::get, self->health.path, 11};
      self->req.set(http::field::host, self->replica->host);
      self->req.set(http::field::user_agent, "tidegate-probe");
      self->req.keep_alive(false);
      self->stream.expires_after(self->timeout());
      http::async_write(self->stream, self->req, [self](beast::error_code ec, std::size_t) {
        if (ec) return self->done(false);
        self->stream.expires_after(self->timeout());
        http::async_read(self->stream, self->buffer, self->res, [self](beast::error_code ec, std::size_t) {
          self->done(!ec && self->res.result_int() == 200);
        });
      });
    });
  }
  std::chrono::steady_clock::duration timeout() const {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(health.timeout_s));
  }
  void done(bool ok) {
    pool->report_probe(replica->id, ok);
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  }

  beast::tcp_stream stream;
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
      for (const auto& r : pool->replicas()) std::make_shared<Probe>(*ioc, pool, r, h)->run();
    }
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
