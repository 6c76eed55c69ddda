#pragma once
// Every tidegate_* metric of the gateway, declared in one place.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

namespace tidegate::gateway {

class Upstreams;

struct GatewayStats final {
  explicit GatewayStats(prometheus::Registry& registry);

  void request_done(const std::string& model, const std::string& tenant, int status, double total_s, double ttfb_s,
                    double overhead_s);
  void local_reply(const std::string& reason) { local_replies.Add({{"reason", reason}}).Increment(); }
  void upstream_error(const std::string& model, const std::string& reason) {
    upstream_errors.Add({{"model", model}, {"reason", reason}}).Increment();
  }
  void queue_wait(const std::string& model, double s) { queue_wait_seconds.Add({{"model", model}}, wait_buckets()).Observe(s); }
  // Gauges that are snapshots of the pools, refreshed before each scrape.
  void refresh(const Upstreams& upstreams);
  std::string serialize();

  prometheus::Registry& registry;
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Histogram>& duration;
  prometheus::Family<prometheus::Histogram>& ttfb;
  prometheus::Histogram& overhead;
  prometheus::Family<prometheus::Gauge>& queue_depth;
  prometheus::Family<prometheus::Histogram>& queue_wait_seconds;
  prometheus::Family<prometheus::Counter>& upstream_errors;
  prometheus::Family<prometheus::Gauge>& replicas;
  prometheus::Family<prometheus::Gauge>& in_flight;
  prometheus::Family<prometheus::Counter>& local_replies;
  prometheus::Family<prometheus::Counter>& retries;
  prometheus::Gauge& connections_open;
  prometheus::Counter& connections_total;

 private:
  static const prometheus::Histogram::BucketBoundaries& latency_buckets();
  static const prometheus::Histogram::BucketBoundaries& wait_buckets();
};

}  // namespace tidegate::gateway
