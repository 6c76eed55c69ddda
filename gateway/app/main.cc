// tidegate --config FILE       run the gateway (SIGHUP reloads, SIGTERM drains)
// tidegate --check-config FILE validate every section and exit (0: "config ok", 2: the error)
//
// Composition root: the gateway's data path plus the semantic cache, cost accounting and the
// scaler, each built from its own config section and plugged in through the gateway's seams
// (filters, routes, RoutingTarget/SignalSource).
#include <atomic>
#include <condition_variable>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <map>
#include <thread>

#include "admin_routes.h"
#include "cache_filter.h"
#include "config_load.h"
#include "cost_filter.h"
#include "dashboard_feed.h"
#include "rate_limit_filter.h"
#include "reload_scope.h"
#include "shared_routing.h"
#include "tidegate/common/config_error.h"
#include "tidegate/common/log.h"
#include "tidegate/cache/shared_cache.h"
#include "tidegate/cost/shared_spend.h"
#include "tidegate/redis/client.h"
#include "tidegate/redis/loop.h"

namespace {

using namespace tidegate;

int usage(int code) {
  std::cerr << "usage: tidegate --config FILE | --check-config FILE\n";
  return code;
}

// Signals are read synchronously. Before any thread of ours exists, main blocks the handled
// signals; every thread inherits the block, and one thread reads them from a signalfd. A signal
// sent before that thread runs stays pending rather than lost. (A handler on any thread lost
// signals under ThreadSanitizer, which defers a handler to a later call in the thread the signal
// landed on and drops it on a thread being born: one SIGHUP in thirty sent just after
// "listening" was never acted on.) Threads a library starts before main (OpenBLAS) do not block
// them, so a handler that writes the signal to a pipe stays installed for those, and the reader
// waits on both. The signalfd does not block: a signal it showed pending may be taken by such a
// thread before the read, and the byte then comes on the pipe.
int g_signal_pipe[2] = {-1, -1};
int g_signal_fd = -1;

extern "C" void on_signal(int sig) {
  const auto byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto n = ::write(g_signal_pipe[1], &byte, 1);  // async-signal-safe
}

bool install_signal_readers() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) return false;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGHUP, SIGTERM, SIGINT}) {
    if (::sigaction(sig, &sa, nullptr) != 0) return false;
    sigaddset(&handled, sig);
  }
  std::signal(SIGPIPE, SIG_IGN);
  if (const int rc = ::pthread_sigmask(SIG_BLOCK, &handled, nullptr); rc != 0) {
    errno = rc;
    return false;
  }
  g_signal_fd = ::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  return g_signal_fd >= 0;
}

// Blocks until a signal arrives; returns its number.
int next_signal() {
  pollfd fds[2] = {{g_signal_fd, POLLIN, 0}, {g_signal_pipe[0], POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return SIGTERM;  // cannot wait: shut down rather than spin
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info{};
      if (::read(g_signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info))
        return static_cast<int>(info.ssi_signo);
    }
    if (fds[1].revents & POLLIN) {
      unsigned char byte = 0;
      if (::read(g_signal_pipe[0], &byte, 1) == 1) return byte;
    }
    if ((fds[0].revents | fds[1].revents) & (POLLERR | POLLHUP | POLLNVAL)) return SIGTERM;
  }
}

// Static replicas are billed from the moment the config lists them until a reload drops them.
// A dropped replica stops costing at the reload although the gateway may still drain it for a
// while: the ledger has no signal for the drain's end, and billing it forever would be worse.
void bill_static_replica_changes(cost::CostAccounting& accounting, const gateway::GatewayConfig& before,
                                 const gateway::GatewayConfig& after) {
  using Key = std::pair<std::string, std::string>;  // model, replica id
  std::map<Key, std::string> old_classes, new_classes;
  for (const auto& m : before.models)
    for (const auto& r : m.replicas) old_classes[{m.name, r.id}] = r.replica_class;
  for (const auto& m : after.models)
    for (const auto& r : m.replicas) new_classes[{m.name, r.id}] = r.replica_class;
  const double now = app::unix_now();
  for (const auto& [key, cls] : old_classes)
    if (!new_classes.count(key)) accounting.replica_state(key.second, key.first, cls, ReplicaState::kStopped, now);
  for (const auto& [key, cls] : new_classes)
    if (!old_classes.count(key)) accounting.replica_state(key.second, key.first, cls, ReplicaState::kActive, now);
}

// Once a second: money accrues by time (idle and standby too), dashboards get a sample.
class Housekeeping final {
 public:
  Housekeeping(app::Components c, const gateway::Gateway& gw) : c_(std::move(c)), gw_(gw), thread_([this] { run(); }) {}
  ~Housekeeping() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    int ticks = 0;
    while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
      lock.unlock();
      tick(++ticks);
      lock.lock();
    }
  }
  void tick(int n) {
    const double t = app::unix_now();
    if (c_.accounting) {
      c_.accounting->advance(t);
      c_.accounting->sync();  // the journal's batched fdatasync
      if (n % 10 == 0) c_.accounting->flush();
    }
    if (!c_.dashboard) return;
    std::map<std::string, double> queue;
    std::map<std::string, std::pair<int, int>> scaling;
    std::map<std::string, double> prefix;
    const auto config = gw_.config();  // models added by a reload are sampled too
    for (const auto& m : config->models) {
      queue[m.name] = static_cast<double>(gw_.signals().sample(m.name).queue_depth);
      if (c_.scaler) {
        const auto decisions = c_.scaler->recent_decisions(m.name);
        if (!decisions.empty()) scaling[m.name] = {decisions.back().desired, c_.scaler->counts(m.name).active};
        for (const auto& [replica, ratio] : c_.scaler->prefix_hit_ratios(m.name)) prefix[m.name + " " + replica] = ratio;
      }
    }
    const auto audit = c_.cache ? app::cache_audit_lines(c_.cache->stats()) : std::map<std::string, double>{};
    c_.dashboard->sample(t, queue, scaling, prefix, audit);
  }

  app::Components c_;
  const gateway::Gateway& gw_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--config" || arg == "--check-config") && i + 1 < argc) {
      check_only = arg == "--check-config";
      config_path = argv[++i];
    } else if (arg == "-h" || arg == "--help") {
      return usage(0);
    } else {
      return usage(2);
    }
  }
  if (config_path.empty()) return usage(2);

  app::Sections sections;
  try {
    sections = app::load_sections(config_path);
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  if (check_only) {
    std::cout << "config ok\n";
    return 0;
  }

  // Before any thread of ours starts (see install_signal_readers).
  if (!install_signal_readers()) {
    log::error("gateway.signal_setup_failed", {{"error", std::strerror(errno)}});
    return 1;
  }

  // The cache's audits reach the model through this gateway itself (audit_transport.h).
  const bool audits_on = sections.cache && sections.cache->enabled && sections.cache->audit.fraction > 0;
  const auto audit_mark = std::make_shared<const app::AuditMark>();
  const app::AuditMark audit_key;  // its secret is the audits' API key when the gateway has keys
  auto with_audits = [&](std::shared_ptr<const gateway::GatewayConfig> g) {
    return audits_on ? app::with_audit_key(std::move(g), audit_key.secret()) : g;
  };
  // State shared with other gateways (redis: section) runs on its own loop thread. The loop
  // outlives the gateway, whose filters hold its clients, and stops before it: its handlers
  // update the gateway's metrics registry.
  std::unique_ptr<redis::Loop> redis_loop;
  gateway::Gateway gw(with_audits(sections.gateway));
  struct StopFirst {
    std::unique_ptr<redis::Loop>& loop;
    ~StopFirst() {
      if (loop) loop->stop();
    }
  } stop_redis_before_gateway{redis_loop};
  std::shared_ptr<redis::Client> redis_client;
  if (sections.redis) {
    redis_loop = std::make_unique<redis::Loop>();
    redis_client = redis::make_client(sections.redis, redis_loop->executor(), &gw.registry());
    redis_client->start();
  }
  app::Components c;
  try {
    if (sections.cost)
      c.accounting = cost::make_cost_accounting(
          sections.cost, gw.registry(),
          redis_client ? cost::make_redis_shared_spend(redis_client, sections.redis, *sections.cost, &gw.registry())
                       : nullptr);
    if (sections.cache) {
      c.cache = cache::make_semantic_cache(sections.cache, gw.registry());
      if (redis_client) {  // the stream's reader blocks in XREAD: a connection of its own
        auto reader = redis::make_client(sections.redis, redis_loop->executor(), &gw.registry(), "cache_stream");
        reader->start();
        c.cache = cache::make_shared_cache(c.cache, redis_client, std::move(reader), sections.redis, &gw.registry());
      }
    }
  } catch (const std::exception& e) {
    log::error("gateway.component_failed", {{"error", e.what()}});
    return 1;
  }
  // The gateway's series share the cost series' time axis on the dashboard (same step and window).
  c.dashboard = sections.cost ? std::make_shared<app::DashboardFeed>(sections.cost->live_step_s,
                                                                     static_cast<std::size_t>(sections.cost->live_points))
                              : std::make_shared<app::DashboardFeed>(5.0, 120);
  gw.add_filter(c.dashboard);
  if (sections.rate_limits)  // before the cache and the budget: a refused request costs nothing
    gw.add_filter(std::make_shared<app::RateLimitFilter>(
        ratelimit::make_rate_limiter(sections.rate_limits,
                                     redis_client ? ratelimit::make_redis_windows(redis_client, sections.redis, &gw.registry())
                                                  : nullptr,
                                     &gw.registry()),
        app::unix_now));
  std::shared_ptr<app::CostFilter> cost_filter;
  if (c.accounting) {
    cost_filter = std::make_shared<app::CostFilter>(c.accounting, app::unix_now,
                                                    audits_on ? audit_mark : nullptr);  // headers only if needed
    gw.add_filter(cost_filter);
  }
  if (c.cache) {
    app::CacheFilter::HitPricer price_hit;
    if (cost_filter) price_hit = [cost_filter](gateway::RequestContext& ctx) { return cost_filter->price_hit(ctx); };
    gw.add_filter(std::make_shared<app::CacheFilter>(c.cache, std::move(price_hit), audit_mark));
  }

  // Static replicas are active from the start; scaled ones report through the listener.
  if (c.accounting) bill_static_replica_changes(*c.accounting, gateway::GatewayConfig{}, *sections.gateway);
  if (sections.scaler) {
    scaler::ScalerOptions options;
    auto accounting = c.accounting;
    options.listener = [accounting](const std::string& id, const std::string& model, const std::string& cls,
                                    ReplicaState state, double) {
      if (accounting) accounting->replica_state(id, model, cls, state, app::unix_now());
    };
    try {
      c.scaler = std::make_shared<scaler::Scaler>(sections.scaler, gw.routing(), &gw.signals(), &gw.registry(),
                                                  std::move(options));
    } catch (const std::invalid_argument& e) {  // a setting only checkable here (no API server, lock file)
      std::cerr << e.what() << "\n";
      return 2;
    }
  }
  app::add_admin_routes(gw, c);
  // Prefix placements and session pins shared with the fleet (read on a connection of its own).
  std::shared_ptr<app::SharedRouting> shared_routing;
  if (redis_client) {
    auto reader = redis::make_client(sections.redis, redis_loop->executor(), &gw.registry(), "routing_stream");
    reader->start();
    shared_routing = app::SharedRouting::start(gw, redis_client, std::move(reader), *sections.redis, &gw.registry());
    gw.on_placement([weak = std::weak_ptr<app::SharedRouting>(shared_routing)](gateway::RoutePlacement p) {
      if (const auto s = weak.lock()) s->add(std::move(p));
    });
  }

  try {
    gw.start();
  } catch (const std::exception& e) {
    log::error("gateway.start_failed", {{"error", e.what()}});
    return 1;
  }
  if (c.scaler) c.scaler->start();
  std::unique_ptr<app::AuditTransport> audits;
  if (audits_on && c.cache) {
    audits = std::make_unique<app::AuditTransport>(app::self_url(*gw.config(), gw.port()), *audit_mark,
                                                   audit_key.secret(), sections.cache->audit.max_in_flight);
    c.cache->set_audit_fetch([t = audits.get()](const cache::AuditRequest& r, double timeout_s,
                                                std::function<void(cache::AuditResponse)> done) {
      t->fetch(r, timeout_s, std::move(done));
    });
  }
  auto housekeeping = std::make_unique<Housekeeping>(c, gw);

  const auto started = gw.config();
  std::thread signals([&] {
    for (;;) {
      const int sig = next_signal();
      if (sig == SIGHUP) {
        try {
          const auto before = gw.config();
          auto next = app::load_sections(config_path).gateway;
          gw.reload(with_audits(next));
          if (c.accounting) bill_static_replica_changes(*c.accounting, *before, *next);
          // Every section was validated above; what the running process cannot apply is named,
          // against the config those parts were built from at start (not the last reload's).
          if (const auto later = app::needs_restart(*started, *next); !later.empty()) {
            boost::json::array keys;
            for (const auto& k : later) keys.emplace_back(k);
            log::warn("gateway.reload_needs_restart",
                      {{"keys", std::move(keys)}, {"note", "these changes take effect at the next restart"}});
          }
        } catch (const std::exception& e) {
          // A bad edit keeps the running config; the operator sees why. (load_sections() turns what it
          // can into a ConfigError naming the key; anything else still must not end the process.)
          log::error("gateway.reload_failed", {{"error", e.what()}});
        }
        continue;
      }
      gw.drain();
      return;
    }
  });
  gw.wait();
  signals.join();
  housekeeping.reset();
  if (c.scaler) c.scaler->stop(true);
  if (c.cache) c.cache->shutdown();  // no new audits; then the ones still out end
  if (shared_routing) shared_routing->stop();
  audits.reset();
  if (c.accounting) {
    c.accounting->advance(app::unix_now());
    c.accounting->flush();
  }
  log::info("gateway.exit");
  return 0;
}
