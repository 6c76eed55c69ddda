#pragma once
// The Tidegate gateway: an OpenAI-compatible HTTP/1.1 proxy in front of model servers.
// Other components plug in through three small seams:
//   - RequestFilter: async pre-forward step (answer locally: cache hit, budget refusal),
//     response headers, and an on-complete callback with tokens/content/timings;
//   - add_route(): extra admin routes (/admin/..., /dashboard);
//   - routing()/signals(): the scaler's RoutingTarget and SignalSource.
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tidegate/gateway/config.h"
#include "tidegate/scaler/routing.h"

namespace prometheus {
class Registry;
}

namespace tidegate::gateway {

using Headers = std::vector<std::pair<std::string, std::string>>;

// A response the gateway sends without asking a replica.
struct LocalReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;      // a whole body; text/event-stream bodies are sent as one piece
  Headers headers;
  std::string reason;    // counted in tidegate_local_replies_total{reason}; e.g. "cache_hit"
};

// A refusal a filter answers with, taken from the gateway's failure table (gateway/src/failure.h):
// the row's status, OpenAI error type and code (also its tidegate_local_replies_total reason),
// the filter's words, and Retry-After when retry_after_s > 0.
enum class Refusal { kRateLimited };
LocalReply refusal(Refusal why, std::string message, double retry_after_s = 0);

struct RequestTimings {
  double total_s = 0;     // request fully read -> response fully written
  double queue_s = 0;     // waiting in the admission queue
  double ttfb_s = -1;     // request read -> first response byte written (-1: never)
  double upstream_s = 0;  // first byte sent to a replica -> last byte received from it
  double overhead_s = 0;  // total - queue - upstream: time the gateway itself added
};

// Per-request state, shared with filters. Fields above "outcome" are set before pre_forward.
// What a filter keeps for one request between its hooks, one slot per type: the type is the key,
// so a slot cannot be read back as anything but what was stored in it (no string keys, no casts
// at the call sites). Each filter declares its own state type in its own source file.
class FilterState final {
 public:
  // The slot of type T, created (value-initialised) on first use.
  template <class T>
  T& get() {
    auto& slot = slots_[std::type_index(typeid(T))];
    if (!slot) slot = std::make_shared<T>();
    return *static_cast<T*>(slot.get());
  }
  // The slot of type T, or nullptr when no hook of this request created it. Writable through a
  // const context: on_complete sees the request as const (a filter cannot change its outcome
  // there) but still settles its own bookkeeping.
  template <class T>
  T* find() const {
    const auto it = slots_.find(std::type_index(typeid(T)));
    return it == slots_.end() ? nullptr : static_cast<T*>(it->second.get());
  }

 private:
  std::unordered_map<std::type_index, std::shared_ptr<void>> slots_;  // shared_ptr<void> keeps T's deleter
};

struct RequestContext {
  std::string request_id;
  std::string path;       // "/v1/chat/completions", ...
  std::string model;
  std::string tenant;     // "anonymous" in open mode
  std::string key_name;   // name of the API key used (never the key)
  std::map<std::string, std::string> tags;  // team, project, ... from the key
  bool stream = false;
  bool client_wants_usage = false;
  std::optional<std::int64_t> max_tokens;
  std::optional<double> temperature;
  std::int64_t n = 1;
  std::string user;
  std::shared_ptr<const boost::json::value> body;  // the parsed request (see reads_request_body)
  // Client headers, names lower-cased, Authorization left out. Copied only when some filter's
  // reads_request_headers() is true.
  std::map<std::string, std::string> request_headers;
  std::chrono::steady_clock::time_point start;

  Headers response_headers;                         // filters add; sent with the response head
  std::map<std::string, std::string> attributes;    // scratchpad shared between filters
  FilterState filter_state;                          // each filter's own, by type

  // Outcome, valid in on_complete.
  int status = 0;
  std::string reason;          // empty on success; error code or local-reply reason otherwise
  bool local_reply = false;    // answered by a filter or the gateway, not a replica
  std::string replica_id;
  std::string replica_class;
  // Why the balancer chose the replica (prefix_aware, session affinity): "prefix",
  // "least_loaded", "bounded", "affinity"; empty for the other balancers.
  std::string_view route_reason;
  std::size_t prefix_blocks_matched = 0;
  // -1: unknown. During a stream, completion_tokens counts content chunks (about one token
  // each) until the usage chunk gives the real figures.
  std::int64_t prompt_tokens = -1;
  std::int64_t completion_tokens = -1;
  std::int64_t cached_prompt_tokens = -1;  // of prompt_tokens, found in the engine's prefix cache
  std::string content;         // choice 0, accumulated across stream chunks
  std::string finish_reason;
  bool complete = false;       // the replica's answer arrived whole (stream reached [DONE])
  std::uint64_t bytes_sent = 0;
  RequestTimings timings;
};

class RequestFilter {
 public:
  // Call exactly once, from any thread: nullopt continues, a LocalReply answers now.
  using Done = std::function<void(std::optional<LocalReply>)>;
  virtual ~RequestFilter() = default;
  // Runs on the connection's event loop. May hand work to another thread and call done
  // later; the session resumes on its own loop. Filters run in the order added.
  virtual void pre_forward(const std::shared_ptr<RequestContext>& ctx, Done done) { done(std::nullopt); }
  // What this filter reads, checked once at add_filter: ctx.request_headers are copied, and
  // ctx.body parsed into a DOM, only when some filter says it reads them.
  virtual bool reads_request_headers() const { return false; }
  virtual bool reads_request_body() const { return true; }
  // False for a filter that keeps the default pre_forward: the gateway then skips the call,
  // and the completion object it would allocate for it, on every request.
  virtual bool runs_before_forward() const { return true; }
  // Each try on a replica (retries make several): replica_id/replica_class are set.
  virtual void on_attempt_start(RequestContext& ctx) {}
  // That try ended; success == the replica answered (non-5xx, stream complete). Token
  // counts in ctx are what the try produced.
  virtual void on_attempt_end(RequestContext& ctx, bool success) {}
  // Streams: called with null once per batch of upstream events (the events one upstream read
  // brought in; often one event, several under load), after they are accounted: ctx tokens
  // are cumulative, so progress is exact at every call. The usage-only chunk gets its own call
  // with usage_chunk = that chunk parsed (events before it in the batch are reported first);
  // changes made to it reach the client when the client asked for usage (otherwise that
  // chunk is stripped anyway).
  virtual void on_stream_event(RequestContext& ctx, boost::json::object* usage_chunk) {}
  // Just before the response head is sent: append to ctx.response_headers. For non-stream
  // responses the body (and usage) is already known here; for streams it is not.
  virtual void on_response_headers(RequestContext& ctx) {}
  // After the response ended (success or failure). Runs on the event loop: do not block.
  virtual void on_complete(const RequestContext& ctx) {}
};

// A request to an extra route.
struct RouteRequest {
  std::string method;
  std::string target;  // path + query
  std::string path;
  std::string query;   // without '?'
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};
using RouteHandler = std::function<void(const RouteRequest&, std::function<void(LocalReply)> respond)>;

// Who may call a route added with add_route().
enum class RouteAccess {
  kAdmin,      // the admin key (Bearer, or Basic with the key as password); refused outright
               // when API keys exist but no admin_key does
  kDashboard,  // open, unless require_admin_key lists dashboard: then as kAdmin, with a
               // Basic challenge so a browser asks
  kOpen,
};

// Where this gateway placed a prompt's prefix or pinned a session (balancer: prefix_aware,
// session_affinity), for the other gateways of a fleet to learn (issue 22: the app shares it
// through Redis, gateway/app/shared_routing.h). Emitted only when the replica is new to the
// prompt's blocks or to the session: a request that found its whole prefix (or its session's
// replica) tells the fleet nothing new.
struct RoutePlacement {
  std::string model;
  std::string replica_id;
  std::vector<std::uint64_t> blocks;  // the prompt's whole chain of block hashes; empty: none new
  std::uint64_t session = 0;          // the session newly pinned to the replica; 0: none
};
// Called on the request's event loop, with no lock held, with the placement to keep: post or
// queue it, never block.
using PlacementSink = std::function<void(RoutePlacement)>;

class Gateway final {
 public:
  explicit Gateway(std::shared_ptr<const GatewayConfig> config);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Setup, before start().
  void add_filter(std::shared_ptr<RequestFilter> filter);
  // Requests whose path starts with `path_prefix` (and method matches; "*" = any).
  void add_route(std::string method, std::string path_prefix, RouteHandler handler,
                 RouteAccess access = RouteAccess::kAdmin);
  prometheus::Registry& registry();            // register more tidegate_* metrics here
  scaler::RoutingTarget& routing();            // thread-safe
  const scaler::SignalSource& signals() const; // thread-safe
  // Routing state shared with other gateways: the sink (set before start()) hears this gateway's
  // placements; learn_placement() applies another's (thread-safe; false when the model or the
  // replica is not known here, or the pool routes on neither prefixes nor sessions).
  void on_placement(PlacementSink sink);
  bool learn_placement(const RoutePlacement& placement);

  // Binds and starts the event loops; throws std::runtime_error when the port is taken.
  void start();
  std::uint16_t port() const;  // the bound port (useful with listen port 0)
  std::shared_ptr<const GatewayConfig> config() const;
  // SIGHUP: new upstream lists, keys, limits; open connections keep going.
  void reload(std::shared_ptr<const GatewayConfig> config);
  // SIGTERM: stop accepting, let in-flight requests finish (up to timeouts.drain), stop.
  void drain();
  void stop();   // immediately
  void wait();   // until stopped

  struct Impl;  // opaque; named publicly only so the implementation files can share it

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace tidegate::gateway
