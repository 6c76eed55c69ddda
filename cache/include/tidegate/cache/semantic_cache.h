#pragma once
// The semantic cache as the gateway sees it: plan (cacheable? which scope?), lookup (async,
// on the cache's worker pool), insert (after a complete answer), and the admin surface.
// The data path never throws: failures come back as LookupResult with status kBypass.
#include <boost/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tidegate/cache/audit.h"

namespace prometheus {
class Registry;
}
namespace YAML {
class Node;
}

namespace tidegate::cache {

enum class CacheStatus { kHit, kMiss, kBypass, kOff };
std::string_view to_string(CacheStatus s);

// What the gateway has already parsed; the cache reads the body for scope and text.
struct RequestView {
  enum class Endpoint { kChat, kCompletions };
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  std::string tenant;
  const boost::json::object* body = nullptr;  // valid for the duration of plan()
  std::string cache_control;                  // Cache-Control request header, verbatim
  std::string cache_directive;                // x-tidegate-cache request header ("bypass")
  std::optional<double> ttl_override_s;       // x-tidegate-cache-ttl request header
};

struct CachePlan {
  bool read = false;   // look up before forwarding
  bool write = false;  // store a complete answer afterwards
  CacheStatus status_without_hit = CacheStatus::kOff;  // kMiss, kBypass or kOff
  std::string reason;      // why bypassed ("n>1", "temperature", "no-store", ...), for logs/metrics
  std::string model;
  std::string tenant;      // empty when the pool is shared
  std::string scope_key;   // hash of everything that must match exactly
  std::string text;        // what is embedded
  double ttl_s = 0;
};

struct CachedAnswer {
  std::string content;
  std::string finish_reason = "stop";  // only "stop" and "length" are stored
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
};

struct LookupResult {
  CacheStatus status = CacheStatus::kMiss;  // kHit, kMiss or kBypass (fail open)
  std::string reason;
  CachedAnswer answer;
  std::uint64_t entry_id = 0;
  float similarity = 0;
  float probability = -1;  // the pair verifier's, when it decided (issue 19); -1 otherwise
  double age_s = 0;
  double embed_s = 0;
  double search_s = 0;
};

class SemanticCache {
 public:
  virtual ~SemanticCache() = default;
  virtual CachePlan plan(const RequestView& request) const = 0;
  // `done` runs exactly once, on a cache worker thread; the caller posts back to its strand.
  virtual void lookup(const CachePlan& plan, std::chrono::steady_clock::time_point deadline,
                      std::function<void(LookupResult)> done) = 0;
  // Non-blocking: queued to the worker pool.
  virtual void insert(const CachePlan& plan, CachedAnswer answer) = 0;

  virtual boost::json::object stats() const = 0;
  // Empty optional = any. Returns the number of entries removed.
  virtual std::size_t erase(const std::optional<std::string>& tenant, const std::optional<std::string>& model) = 0;
  virtual bool erase_entry(std::uint64_t id) = 0;
  // Writes a snapshot of the data directory now (no-op without one). Added after the first
  // version of this interface, with a default, so other implementations need not change.
  virtual void flush() {}
  // Online audits (issue 19, audit.h), defaulted like flush(). The gateway installs how an audit
  // reaches the model; until then no hit is audited.
  virtual void set_audit_fetch(AuditFetch fetch) {}
  // A hit just served: sampled (audit.fraction) and, when chosen, asked of the model again in the
  // background. Returns at once, never throws. `body` is the client's request.
  virtual void audit(const CachePlan& plan, const LookupResult& hit, RequestView::Endpoint endpoint,
                     const boost::json::object& body) {}
  // Flushes persistence and stops workers; lookups after this answer kBypass.
  virtual void shutdown() = 0;

  // Several gateways (shared_cache.h, issue 22), defaulted like flush(). The listener (set before
  // the first insert) hears, on a cache worker, each insert of this gateway once its text is
  // embedded, so that the vector travels with it and the other gateways need not embed it again.
  using InsertListener = std::function<void(const CachePlan&, const CachedAnswer&, const std::vector<float>&)>;
  virtual void set_insert_listener(InsertListener listener) {}
  // Another gateway's insert: stored with `vector` when it has this cache's dimension (the caller
  // checked embedder_id()), else embedded here; never heard by the listener. True when `vector`
  // was used (nothing embedded).
  virtual bool insert_from_peer(const CachePlan& plan, CachedAnswer answer, std::vector<float> vector) {
    insert(plan, std::move(answer));
    return false;
  }
  // Names the vectors this cache's embedder makes ("minilm/all-MiniLM-L6-v2/384"); empty: unknown,
  // and no vector is shared.
  virtual std::string embedder_id() const { return {}; }
};

// Rendering a hit in OpenAI shapes (fresh id and created time; usage from the entry).
std::string render_hit_json(RequestView::Endpoint endpoint, const std::string& model, const CachedAnswer& answer);
// A complete SSE body: role chunk, content chunks, finish chunk, usage chunk when asked, [DONE].
// usage_extra's fields join the usage chunk (the gateway's price of the hit, as on a forwarded
// stream's usage chunk).
std::string render_hit_sse(RequestView::Endpoint endpoint, const std::string& model, const CachedAnswer& answer,
                           bool include_usage, const boost::json::object* usage_extra = nullptr);

struct CacheConfig;  // defined in cache_config.h
// base_dir: the config file's folder; a relative embedder.model_dir is read from it (from the
// working directory when base_dir is empty). The minilm model folder must exist (ConfigError).
std::shared_ptr<const CacheConfig> parse_cache_config(const YAML::Node& node, const std::string& path,
                                                     const std::string& base_dir = {});
// Returns nullptr when the config disables the cache.
std::unique_ptr<SemanticCache> make_semantic_cache(std::shared_ptr<const CacheConfig> config,
                                                   prometheus::Registry& registry);

}  // namespace tidegate::cache
