// SharedRouting (shared_routing.h): placements batched into the fleet's routing stream, and the
// other gateways' placements applied to this gateway's pools.
#include "shared_routing.h"

#include "placement_wire.h"

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <boost/asio/steady_timer.hpp>

#include <chrono>

#include "tidegate/common/log.h"
#include "tidegate/redis/event_stream.h"

namespace tidegate::app {
namespace {

constexpr std::size_t kMaxPending = 4096;   // placements waiting for the next flush
constexpr auto kFlushAfter = std::chrono::milliseconds(5);

}  // namespace

struct SharedRouting::Metrics {
  redis::StreamCounters stream;
  prometheus::Counter* sent = nullptr;
  prometheus::Counter* dropped = nullptr;
  prometheus::Counter* learned = nullptr;
  prometheus::Counter* ignored = nullptr;
  prometheus::Counter* malformed = nullptr;

  explicit Metrics(prometheus::Registry* r)
      : stream(redis::register_stream_counters(
            r, "tidegate_routing_shared_events_total",
            "Entries of the fleet's routing stream (batches of placements): published, publish_failed (Redis "
            "down: this gateway's placements stay local), applied (another gateway's), missed (trimmed before "
            "this gateway read them)")) {
    if (!r) return;
    auto& placements = prometheus::BuildCounter()
                           .Name("tidegate_routing_shared_placements_total")
                           .Help("Prefix placements and session pins shared with the fleet: sent, dropped (the "
                                 "batch was full), learned (another gateway's, applied here), ignored (its model "
                                 "or replica unknown or not routable here), malformed (an entry not decoded)")
                           .Register(*r);
    sent = &placements.Add({{"outcome", "sent"}});
    dropped = &placements.Add({{"outcome", "dropped"}});
    learned = &placements.Add({{"outcome", "learned"}});
    ignored = &placements.Add({{"outcome", "ignored"}});
    malformed = &placements.Add({{"outcome", "malformed"}});
  }
  static void bump(prometheus::Counter* c, double by = 1) {
    if (c) c->Increment(by);
  }
};

SharedRouting::SharedRouting(gateway::Gateway& gateway, std::shared_ptr<redis::Client> publisher,
                             prometheus::Registry* registry)
    : gateway_(gateway), publisher_(std::move(publisher)), metrics_(std::make_unique<Metrics>(registry)) {}

SharedRouting::~SharedRouting() = default;

std::shared_ptr<SharedRouting> SharedRouting::start(gateway::Gateway& gateway, std::shared_ptr<redis::Client> publisher,
                                                    std::shared_ptr<redis::Client> reader,
                                                    const redis::RedisConfig& config, prometheus::Registry* registry) {
  auto s = std::make_shared<SharedRouting>(gateway, publisher, registry);
  s->stream_ = redis::EventStream::start(
      std::move(publisher), std::move(reader), {config.key_prefix + ":routing", config.routing_stream_max_len, "routing"},
      s->metrics_->stream, [weak = std::weak_ptr<SharedRouting>(s)](const redis::EventStream::Fields& f) {
        const auto self = weak.lock();
        return self && self->apply(f);
      });
  return s;
}

void SharedRouting::add(gateway::RoutePlacement placement) {
  {
    std::lock_guard lock(mu_);
    if (pending_.size() >= kMaxPending) {
      Metrics::bump(metrics_->dropped);
      return;
    }
    pending_.push_back(std::move(placement));
    if (flush_scheduled_) return;
    flush_scheduled_ = true;
  }
  // The first placement of a batch starts its clock: one Redis command carries every placement
  // of the next 5 ms, however busy the gateway.
  auto timer = std::make_shared<boost::asio::steady_timer>(publisher_->executor(), kFlushAfter);
  timer->async_wait([weak = weak_from_this(), timer](boost::system::error_code ec) {
    if (auto self = weak.lock(); self && !ec) self->flush();
  });
}

void SharedRouting::flush() {
  std::vector<gateway::RoutePlacement> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(pending_);
    flush_scheduled_ = false;
  }
  if (batch.empty()) return;
  Metrics::bump(metrics_->sent, static_cast<double>(batch.size()));
  stream_->publish({"op", "placements", "data", encode_placements(batch)});
}

// Another gateway's batch, on the reader's strand.
bool SharedRouting::apply(const std::map<std::string, std::string>& fields) {
  const auto op = fields.find("op");
  const auto data = fields.find("data");
  if (op == fields.end() || op->second != "placements" || data == fields.end()) return false;
  const auto batch = decode_placements(data->second);
  if (!batch) {
    Metrics::bump(metrics_->malformed);
    // A peer of another version would send one every few milliseconds: counted always, logged
    // once a minute with how many were not.
    if (std::uint64_t suppressed = 0; malformed_log_.admit(suppressed))
      log::warn("routing.shared_placements_malformed", {{"bytes", data->second.size()}, {"suppressed", suppressed}});
    return false;
  }
  for (const auto& p : *batch) Metrics::bump(gateway_.learn_placement(p) ? metrics_->learned : metrics_->ignored);
  return true;
}

void SharedRouting::stop() {
  if (stream_) stream_->stop();
}

}  // namespace tidegate::app
