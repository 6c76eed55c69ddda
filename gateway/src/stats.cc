#include "stats.h"

#include <prometheus/text_serializer.h>

#include <charconv>
#include <cstdio>

#include "upstreams.h"

namespace tidegate::gateway {
namespace p = prometheus;

const p::Histogram::BucketBoundaries& GatewayStats::latency_buckets() {
  static const p::Histogram::BucketBoundaries b{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
  return b;
}
const p::Histogram::BucketBoundaries& GatewayStats::wait_buckets() {
  static const p::Histogram::BucketBoundaries b{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60};
  return b;
}

GatewayStats::GatewayStats(p::Registry& r)
    : registry(r),
      requests(p::BuildCounter().Name("tidegate_requests_total").Help("Inference requests by model, tenant and status").Register(r)),
      duration(p::BuildHistogram().Name("tidegate_request_duration_seconds").Help("Request duration, read to last byte").Register(r)),
      ttfb(p::BuildHistogram().Name("tidegate_time_to_first_byte_seconds").Help("Request read to first response byte").Register(r)),
      overhead(p::BuildHistogram()
                   .Name("tidegate_gateway_overhead_seconds")
                   .Help("Time spent in the gateway, excluding queue wait and upstream time")
                   .Register(r)
                   .Add({}, p::Histogram::BucketBoundaries{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
                                                           0.0025, 0.005, 0.01, 0.05})),
      queue_depth(p::BuildGauge().Name("tidegate_queue_depth").Help("Requests waiting in the admission queue").Register(r)),
      queue_wait_seconds(p::BuildHistogram().Name("tidegate_queue_wait_seconds").Help("Time spent in the admission queue, by the requests that had to wait").Register(r)),
      upstream_errors(p::BuildCounter().Name("tidegate_upstream_errors_total").Help("Upstream failures by reason").Register(r)),
      upstream_rejections(p::BuildCounter()
                              .Name("tidegate_upstream_rejections_total")
                              .Help("Engine error answers attributed to the request (4xx, 501, 5xx with an error "
                                    "object): relayed without a retry, not held against the replica")
                              .Register(r)),
      replicas(p::BuildGauge().Name("tidegate_upstream_replicas").Help("Upstream replicas by routing state").Register(r)),
      in_flight(p::BuildGauge().Name("tidegate_upstream_in_flight").Help("Requests being served by replicas").Register(r)),
      local_replies(p::BuildCounter().Name("tidegate_local_replies_total").Help("Responses the gateway answered itself, by reason").Register(r)),
      retries(p::BuildCounter().Name("tidegate_retries_total").Help("Requests retried on another replica").Register(r)),
      filter_errors(p::BuildCounter().Name("tidegate_filter_errors_total").Help("Filter hooks that threw, by hook (the worker goes on)").Register(r)),
      connections_open(p::BuildGauge().Name("tidegate_connections_open").Help("Open client connections").Register(r).Add({})),
      connections_total(p::BuildCounter().Name("tidegate_connections_total").Help("Accepted client connections").Register(r).Add({})) {}

void GatewayStats::request_done(RequestSeries& series, const std::string& model, const std::string& tenant, int status,
                                double total_s, double ttfb_s, double overhead_s) {
  if (!series.requests || series.status != status || series.model != model || series.tenant != tenant) {
    char code[16];
    const auto n = static_cast<std::size_t>(std::to_chars(code, code + sizeof code, status).ptr - code);
    std::string key;
    key.reserve(model.size() + tenant.size() + 8);
    key.append(model).append(1, '\x1f').append(tenant).append(1, '\x1f').append(code, n);
    series.requests = &request_children.get(key, [&]() -> p::Counter& {
      return requests.Add({{"model", model}, {"tenant", tenant}, {"status", std::string(code, n)}});
    });
    series.duration = &duration_children.get(model, [&]() -> p::Histogram& { return duration.Add({{"model", model}}, latency_buckets()); });
    series.ttfb = &ttfb_children.get(model, [&]() -> p::Histogram& { return ttfb.Add({{"model", model}}, latency_buckets()); });
    series.model = model;
    series.tenant = tenant;
    series.status = status;
  }
  series.requests->Increment();
  series.duration->Observe(total_s);
  if (ttfb_s >= 0) series.ttfb->Observe(ttfb_s);
  if (overhead_s >= 0) overhead.Observe(overhead_s);
}

void GatewayStats::refresh(const Upstreams& upstreams) {
  for (const auto& pool : upstreams.pools()) {
    const auto& m = pool->model();
    const auto c = pool->state_counts();
    replicas.Add({{"model", m}, {"state", "healthy"}}).Set(c.healthy);
    replicas.Add({{"model", m}, {"state", "unknown"}}).Set(c.unknown);
    replicas.Add({{"model", m}, {"state", "ejected"}}).Set(c.ejected);
    replicas.Add({{"model", m}, {"state", "draining"}}).Set(c.draining);
    const auto s = pool->sample();
    queue_depth.Add({{"model", m}}).Set(static_cast<double>(s.queue_depth));
    in_flight.Add({{"model", m}}).Set(static_cast<double>(s.in_flight));
  }
}

std::string GatewayStats::serialize() {
  p::TextSerializer serializer;
  return serializer.Serialize(registry.Collect());
}

}  // namespace tidegate::gateway
