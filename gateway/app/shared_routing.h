#pragma once
// Prefix-routing hints and session affinity shared by the gateways of a fleet (issue 22).
//
// Each gateway's prefix_aware balancer believes a replica holds the prompt blocks it routed there
// itself, and pins a session where it first sent it; behind a Kubernetes Service the next turn of
// a conversation lands on any gateway, which, alone, would know nothing of either and scatter
// them. So every placement that taught a replica something new (gateway::RoutePlacement: blocks it
// did not hold, a session newly pinned) is batched for up to 5 ms and appended to the Redis
// stream <key_prefix>:routing as one entry; every gateway reads it (redis::EventStream, a
// connection of its own) and applies the others' placements to its own pools, within
// milliseconds. Conflicts need no resolution: the latest placement read wins everywhere, as it
// does within one gateway.
//
// Nothing on the data path waits for Redis: the request's loop appends to a bounded batch under
// a short lock (4096 placements; beyond that placements are dropped, counted); while Redis is
// down each gateway routes on what it knows (what others placed meanwhile is a later miss, not a
// wrong answer: the engine prefills what it does not hold).
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tidegate/common/log.h"
#include "tidegate/gateway/gateway.h"
#include "tidegate/redis/client.h"
#include "tidegate/redis/config.h"

namespace tidegate::redis {
class EventStream;
}

namespace tidegate::app {

class SharedRouting final : public std::enable_shared_from_this<SharedRouting> {
 public:
  // Starts reading at once; call before gw.start() and set the gateway's sink to add().
  // `gateway` must outlive the reader's loop (main stops the Redis loop first).
  static std::shared_ptr<SharedRouting> start(gateway::Gateway& gateway, std::shared_ptr<redis::Client> publisher,
                                              std::shared_ptr<redis::Client> reader, const redis::RedisConfig& config,
                                              prometheus::Registry* registry);
  // The gateway's PlacementSink: any thread, never blocks.
  void add(gateway::RoutePlacement placement);
  void stop();

  struct Metrics;
  SharedRouting(gateway::Gateway& gateway, std::shared_ptr<redis::Client> publisher, prometheus::Registry* registry);
  ~SharedRouting();

 private:
  void flush();
  bool apply(const std::map<std::string, std::string>& fields);

  gateway::Gateway& gateway_;
  std::shared_ptr<redis::Client> publisher_;
  std::unique_ptr<Metrics> metrics_;
  log::Throttle malformed_log_{std::chrono::minutes(1)};
  std::shared_ptr<redis::EventStream> stream_;
  std::mutex mu_;
  std::vector<gateway::RoutePlacement> pending_;
  bool flush_scheduled_ = false;
};

}  // namespace tidegate::app
