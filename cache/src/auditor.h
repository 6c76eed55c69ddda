#pragma once
// The online audits of served hits (tidegate/cache/audit.h): sampling, the bound on audits in
// flight, the call to the model through the gateway's AuditFetch, the answer judge, metrics,
// and the AuditBook whose per-scope cuts the lookup consults. Never blocks a lookup; the
// callbacks of calls still out when the cache shuts down find it stopped and only count.
#include <boost/json/object.hpp>

#include <memory>
#include <string>

#include "tidegate/cache/audit.h"
#include "tidegate/cache/cache_config.h"
#include "tidegate/encoder/embed_batcher.h"
#include "tidegate/cache/semantic_cache.h"

namespace prometheus {
class Registry;
}

namespace tidegate::cache {

class Auditor final {
 public:
  Auditor(std::shared_ptr<const CacheConfig> config, prometheus::Registry& registry, encoder::EmbedBatcher& batcher);
  ~Auditor();

  void set_fetch(AuditFetch fetch);
  // A hit just served, decided on `score` in units `kind` ("cosine" or "verifier"). Audited in
  // the background when sampled; returns at once.
  void offer(const CachePlan& plan, const LookupResult& hit, const std::string& kind, double score,
             RequestView::Endpoint endpoint, const boost::json::object& body);
  // The scope's audit evidence refuses a hit at this score (README "Online audits").
  bool refuses(const std::string& scope_key, const std::string& kind, double score) const;

  boost::json::object stats() const;
  // The book in `dir`/audit.json: read at start (a problem to report, or empty), written when
  // something changed (false and *error when the write failed).
  std::string load(const std::string& dir);
  bool save(const std::string& dir, std::string* error);
  // No new audits; answers still out are counted as dropped, the embedder is not touched again.
  void shutdown();

  struct Core;

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace tidegate::cache
