#pragma once
// Every tidegate_* metric of the gateway, declared in one place.
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tidegate::gateway {

class Upstreams;

// Family::Add builds a label map, hashes it and locks on every call. Children are never
// removed, so the hot path looks them up by one flat key under a short lock instead.
template <class T>
class ChildCache final {
 public:
  template <class Make>
  T& get(const std::string& key, Make&& make) {
    std::lock_guard lock(mu_);
    if (auto it = map_.find(key); it != map_.end()) return *it->second;
    T& child = make();
    map_.emplace(key, &child);
    return child;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, T*> map_;
};

// The metric children a connection's last request used. A connection's requests nearly
// always share model, tenant and status, so the next one skips the lookups (three locks).
struct RequestSeries {
  std::string model, tenant;
  int status = 0;
  prometheus::Counter* requests = nullptr;
  prometheus::Histogram* duration = nullptr;
  prometheus::Histogram* ttfb = nullptr;
};

struct GatewayStats final {
  explicit GatewayStats(prometheus::Registry& registry);

  void request_done(RequestSeries& series, const std::string& model, const std::string& tenant, int status,
                    double total_s, double ttfb_s, double overhead_s);
  void local_reply(const std::string& reason) {
    local_reply_children.get(reason, [&]() -> prometheus::Counter& { return local_replies.Add({{"reason", reason}}); })
        .Increment();
  }
  // A filter hook that threw (a bug in the filter), by hook; the request went on or got a 500.
  void filter_error(const char* hook) { filter_errors.Add({{"hook", hook}}).Increment(); }
  void upstream_error(const std::string& model, const std::string& reason) {
    upstream_errors.Add({{"model", model}, {"reason", reason}}).Increment();
  }
  // An engine error attributed to the request (upstream_answer.h): relayed, not a replica failure.
  void upstream_rejected(const std::string& model, int status) {
    upstream_rejections.Add({{"model", model}, {"status", std::to_string(status)}}).Increment();
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
  prometheus::Family<prometheus::Counter>& upstream_rejections;
  prometheus::Family<prometheus::Gauge>& replicas;
  prometheus::Family<prometheus::Gauge>& in_flight;
  prometheus::Family<prometheus::Counter>& local_replies;
  prometheus::Family<prometheus::Counter>& retries;
  prometheus::Family<prometheus::Counter>& filter_errors;
  prometheus::Gauge& connections_open;
  prometheus::Counter& connections_total;

 private:
  ChildCache<prometheus::Counter> request_children;
  ChildCache<prometheus::Histogram> duration_children;
  ChildCache<prometheus::Histogram> ttfb_children;
  ChildCache<prometheus::Counter> local_reply_children;
  static const prometheus::Histogram::BucketBoundaries& latency_buckets();
  static const prometheus::Histogram::BucketBoundaries& wait_buckets();
};

}  // namespace tidegate::gateway
