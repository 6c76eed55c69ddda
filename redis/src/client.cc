// The Redis connection: hiredis's async context on a strand, one timer per command, reconnects
// with exponential backoff. Everything below runs on the strand except command(), start() and
// stop(), which only post to it.
#include "tidegate/redis/client.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "hiredis_asio.h"
#include "tidegate/common/log.h"

namespace tidegate::redis {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// Beyond this many unanswered commands the connection is not keeping up: new ones fail at once
// rather than growing hiredis's output buffer without bound.
constexpr std::size_t kMaxOutstanding = 10000;

Reply convert(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_INTEGER: out.type = Reply::Type::kInteger, out.integer = r->integer; break;
    case REDIS_REPLY_STRING: out.type = Reply::Type::kString, out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_STATUS: out.type = Reply::Type::kStatus, out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_ERROR: out.type = Reply::Type::kError, out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::kArray;
      out.elements.reserve(r->elements);
      for (std::size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    default: break;  // nil
  }
  return out;
}

asio::steady_timer::duration seconds(double s) {
  return std::chrono::duration_cast<asio::steady_timer::duration>(std::chrono::duration<double>(std::max(0.0, s)));
}

struct Metrics {
  prometheus::Gauge* up = nullptr;
  prometheus::Counter* ok = nullptr;
  prometheus::Counter* error_reply = nullptr;
  prometheus::Counter* timeout = nullptr;
  prometheus::Counter* unavailable = nullptr;
  prometheus::Counter* connects_ok = nullptr;
  prometheus::Counter* connects_failed = nullptr;

  Metrics(prometheus::Registry* r, const std::string& conn) {
    if (!r) return;
    up = &prometheus::BuildGauge().Name("tidegate_redis_up")
              .Help("1 while the Redis connection is established; 0 means this gateway runs on local state (degraded)")
              .Register(*r).Add({{"connection", conn}});
    auto& cmds = prometheus::BuildCounter().Name("tidegate_redis_commands_total")
                     .Help("Redis commands by outcome (timeout and unavailable fall back to local state)")
                     .Register(*r);
    ok = &cmds.Add({{"connection", conn}, {"outcome", "ok"}});
    error_reply = &cmds.Add({{"connection", conn}, {"outcome", "error_reply"}});
    timeout = &cmds.Add({{"connection", conn}, {"outcome", "timeout"}});
    unavailable = &cmds.Add({{"connection", conn}, {"outcome", "unavailable"}});
    auto& conns = prometheus::BuildCounter().Name("tidegate_redis_connects_total")
                      .Help("Redis connection attempts by result").Register(*r);
    connects_ok = &conns.Add({{"connection", conn}, {"result", "ok"}});
    connects_failed = &conns.Add({{"connection", conn}, {"result", "failed"}});
  }
  static void inc(prometheus::Counter* c) { if (c) c->Increment(); }
};

class Connection final : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<const RedisConfig> config, asio::any_io_executor ex, prometheus::Registry* registry,
             std::string name)
      : config_(std::move(config)), strand_(asio::make_strand(ex)), name_(std::move(name)),
        metrics_(registry, name_), reconnect_timer_(strand_), connect_timer_(strand_) {}

  ~Connection() {
    // Only reached with a live context when the executor was destroyed before stop() ran:
    // nothing else runs on the strand any more, and callers' callbacks are not called.
    destroying_ = true;
    if (ac_) redisAsyncFree(ac_);
  }

  void command(std::vector<std::string> args, Client::Callback done, double timeout_s) {
    asio::post(strand_, [self = shared_from_this(), args = std::move(args), done = std::move(done), timeout_s]() mutable {
      self->send(std::move(args), std::move(done), timeout_s < 0 ? self->config_->command_timeout_s : timeout_s);
    });
  }
  Health health() const { return health_.load(); }
  asio::any_io_executor executor() const { return strand_; }
  void on_health(std::function<void(Health)> f) { listener_ = std::move(f); }
  void start() {
    asio::post(strand_, [self = shared_from_this()] { self->connect(); });
  }
  void stop() {
    asio::post(strand_, [self = shared_from_this()] {
      if (self->stopped_) return;
      self->stopped_ = true;
      self->reconnect_timer_.cancel();
      self->connect_timer_.cancel();
      self->drop("stopped");
      self->health_ = Health::kDown;  // quietly: stopping is not an outage
      if (self->metrics_.up) self->metrics_.up->Set(0);
    });
  }

 private:
  struct Pending {
    explicit Pending(Client::Callback d, const Strand& s) : done(std::move(d)), timer(s) {}
    Client::Callback done;  // empty once completed
    asio::steady_timer timer;
    bool replied = false;
    std::uint64_t epoch = 0;
  };

  static Connection* of(const redisAsyncContext* c) { return static_cast<Connection*>(c->data); }

  void finish(Pending& p, Result r) {
    if (!p.done) return;
    auto done = std::move(p.done);
    p.done = nullptr;
    if (destroying_) return;  // at exit: the callers and the metrics registry may be gone
    switch (r.outcome) {
      case Result::Outcome::kReply: Metrics::inc(r.reply.is_error() ? metrics_.error_reply : metrics_.ok); break;
      case Result::Outcome::kTimeout: Metrics::inc(metrics_.timeout); break;
      case Result::Outcome::kUnavailable: Metrics::inc(metrics_.unavailable); break;
    }
    done(std::move(r));
  }

  static Result failure(Result::Outcome o, std::string why) {
    Result r;
    r.outcome = o;
    r.error = std::move(why);
    return r;
  }

  void send(std::vector<std::string> args, Client::Callback done, double timeout_s) {
    auto p = std::make_shared<Pending>(std::move(done), strand_);
    if (!ac_ || stopped_) return finish(*p, failure(Result::Outcome::kUnavailable, "redis unavailable: " + last_error_));
    if (outstanding_ >= kMaxOutstanding)
      return finish(*p, failure(Result::Outcome::kUnavailable, "redis: too many unanswered commands"));
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) argv.push_back(a.data()), lens.push_back(a.size());
    auto* holder = new std::shared_ptr<Pending>(p);
    if (redisAsyncCommandArgv(ac_, &Connection::on_reply, holder, static_cast<int>(argv.size()), argv.data(),
                              lens.data()) != REDIS_OK) {
      delete holder;
      return finish(*p, failure(Result::Outcome::kUnavailable, "redis: connection closing"));
    }
    ++outstanding_;
    p->epoch = epoch_;
    p->timer.expires_after(seconds(timeout_s));
    p->timer.async_wait([self = shared_from_this(), p, timeout_s](boost::system::error_code ec) {
      if (!ec) self->timed_out(p, timeout_s);
    });
  }

  void timed_out(const std::shared_ptr<Pending>& p, double timeout_s) {
    if (p->done) {
      finish(*p, failure(Result::Outcome::kTimeout, "redis: no reply within " + std::to_string(timeout_s) + " s"));
      // Replies come in order, so one that is still missing much later means the server (or the
      // path to it) is stuck: drop the connection so commands fail fast and a reconnect starts.
      p->timer.expires_after(seconds(std::max(3 * timeout_s, 0.2)));
      p->timer.async_wait([self = shared_from_this(), p](boost::system::error_code ec) {
        if (!ec && !p->replied && p->epoch == self->epoch_) self->drop("no reply from redis (stalled)");
      });
    }
  }

  static void on_reply(redisAsyncContext* c, void* r, void* privdata) {
    auto* holder = static_cast<std::shared_ptr<Pending>*>(privdata);
    const auto p = std::move(*holder);
    delete holder;
    auto* self = of(c);
    --self->outstanding_;
    p->replied = true;
    p->timer.cancel();
    if (r) self->finish(*p, Result{Result::Outcome::kReply, convert(static_cast<redisReply*>(r)), {}});
    else self->finish(*p, failure(Result::Outcome::kUnavailable, "redis connection lost"));
  }

  void connect() {
    if (stopped_ || ac_) return;
    ++epoch_;
    connected_ = false;
    ac_ = redisAsyncConnect(config_->host.c_str(), config_->port);
    if (!ac_ || ac_->err) {
      const std::string why = ac_ ? ac_->errstr : "out of memory";
      if (ac_) redisAsyncFree(ac_);
      ac_ = nullptr;
      return lost(why);
    }
    ac_->data = this;
    HiredisAsio::attach(ac_, strand_);
    redisAsyncSetDisconnectCallback(ac_, &Connection::on_disconnect);
    redisAsyncSetConnectCallback(ac_, &Connection::on_connect);  // after attach: it arms the write wait
    // AUTH goes first in the pipeline: whatever callers send meanwhile is queued behind it.
    if (!config_->password.empty())
      send({"AUTH", config_->password},
           [self = shared_from_this(), epoch = epoch_](Result r) {
             if (r.ok()) return self->authenticated(epoch);
             const auto why = "redis AUTH failed: " + (r.outcome == Result::Outcome::kReply ? r.reply.str : r.error);
             // Posted: this runs inside hiredis's reply callback, where the context must not be freed.
             asio::post(self->strand_, [self, epoch, why] {
               if (epoch == self->epoch_) self->drop(why);
             });
           },
           config_->connect_timeout_s);
    connect_timer_.expires_after(seconds(config_->connect_timeout_s));
    connect_timer_.async_wait([self = shared_from_this(), epoch = epoch_](boost::system::error_code ec) {
      if (!ec && epoch == self->epoch_ && !self->connected_) self->drop("connect timeout");
    });
  }

  static void on_connect(const redisAsyncContext* c, int status) {
    auto* self = of(c);
    if (status != REDIS_OK) {
      self->ac_ = nullptr;  // hiredis frees the context after this returns
      Metrics::inc(self->metrics_.connects_failed);
      return self->lost(c->errstr);
    }
    self->connected_ = true;
    self->connect_timer_.cancel();
    Metrics::inc(self->metrics_.connects_ok);
    if (self->config_->password.empty()) self->authenticated(self->epoch_);  // else once AUTH answers OK
  }

  void authenticated(std::uint64_t epoch) {
    if (epoch != epoch_ || !connected_) return;
    failures_ = 0;
    set_health(Health::kUp, "");
  }

  static void on_disconnect(const redisAsyncContext* c, int status) {
    auto* self = of(c);
    self->ac_ = nullptr;
    if (self->destroying_) return;
    self->lost(!self->drop_reason_.empty() ? self->drop_reason_ : status == REDIS_OK ? "connection closed" : c->errstr);
  }

  // Frees the context; its pending commands complete with kUnavailable. Never called from
  // inside a hiredis callback (only from timers and stop()).
  void drop(const std::string& why) {
    auto* ac = ac_;
    if (!ac) return;
    drop_reason_ = why;
    const bool was_connected = connected_;
    redisAsyncFree(ac);  // calls on_disconnect when the connection had been established
    drop_reason_.clear();
    if (!was_connected) {
      ac_ = nullptr;
      Metrics::inc(metrics_.connects_failed);
      lost(why);
    }
  }

  void lost(const std::string& why) {
    connected_ = false;
    last_error_ = why;
    if (stopped_) return;
    set_health(Health::kDown, why);
    const double delay =
        std::min(config_->reconnect_max_s, config_->reconnect_min_s * std::pow(2.0, std::min(failures_, 30)));
    ++failures_;
    reconnect_timer_.expires_after(seconds(delay));
    reconnect_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->connect();
    });
  }

  // One log line per transition, never one per failed attempt or command.
  void set_health(Health h, const std::string& why) {
    if (health_ == h) return;
    health_ = h;
    const std::string address = config_->host + ":" + std::to_string(config_->port);
    if (h == Health::kUp) log::info("redis.up", {{"connection", name_}, {"address", address}});
    else log::warn("redis.down", {{"connection", name_}, {"address", address}, {"error", why}});
    if (metrics_.up) metrics_.up->Set(h == Health::kUp ? 1 : 0);
    if (listener_) listener_(h);
  }

  std::shared_ptr<const RedisConfig> config_;
  Strand strand_;
  std::string name_;
  Metrics metrics_;
  asio::steady_timer reconnect_timer_;
  asio::steady_timer connect_timer_;
  std::function<void(Health)> listener_;
  std::atomic<Health> health_{Health::kConnecting};
  redisAsyncContext* ac_ = nullptr;
  std::uint64_t epoch_ = 0;  // which connection: a stale timer must not drop a newer one
  std::size_t outstanding_ = 0;
  int failures_ = 0;
  bool connected_ = false;
  bool stopped_ = false;
  bool destroying_ = false;
  std::string drop_reason_;
  std::string last_error_ = "not connected yet";
};

// What callers hold: the last handle stops the connection, which then ends on its own strand.
class Handle final : public Client {
 public:
  explicit Handle(std::shared_ptr<Connection> c) : c_(std::move(c)) {}
  ~Handle() override { c_->stop(); }
  void command(std::vector<std::string> args, Callback done, double timeout_s) override {
    c_->command(std::move(args), std::move(done), timeout_s);
  }
  Health health() const override { return c_->health(); }
  asio::any_io_executor executor() const override { return c_->executor(); }
  void on_health(std::function<void(Health)> listener) override { c_->on_health(std::move(listener)); }
  void start() override { c_->start(); }
  void stop() override { c_->stop(); }

 private:
  std::shared_ptr<Connection> c_;
};

}  // namespace

double Reply::number(double fallback) const {
  if (type == Type::kInteger) return static_cast<double>(integer);
  if (type != Type::kString && type != Type::kStatus) return fallback;
  if (str.empty()) return fallback;
  char* end = nullptr;
  const double v = std::strtod(str.c_str(), &end);
  return end == str.c_str() + str.size() && std::isfinite(v) ? v : fallback;
}

const char* to_string(Health h) {
  switch (h) {
    case Health::kConnecting: return "connecting";
    case Health::kUp: return "up";
    case Health::kDown: return "down";
  }
  return "down";
}

std::shared_ptr<Client> make_client(std::shared_ptr<const RedisConfig> config, asio::any_io_executor executor,
                                    prometheus::Registry* registry, const std::string& connection) {
  return std::make_shared<Handle>(
      std::make_shared<Connection>(std::move(config), std::move(executor), registry, connection));
}

}  // namespace tidegate::redis
