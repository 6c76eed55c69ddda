#pragma once
// Online audits of cache hits (issue 19; cache/README.md "Online audits"). A fraction of served
// hits is also sent to the model in the background, never delaying the client; an answer judge
// (cosine of the cached and the fresh answer under the cache's own embedder) says whether the
// hit was right. The results give the audited false-hit rate per model pool with a one-sided
// upper bound, and tighten the decision of each scope where a hit was judged wrong.
#include <cstddef>
#include <functional>
#include <string>

namespace tidegate::cache {

struct AuditConfig {
  // Share of served hits audited (0 turns audits off). Sampling is deterministic, one hit in
  // 1/fraction, so a flood of hits yields exactly that share and tests can ask for 1.0.
  double fraction = 0.01;
  // Audits waiting on the model at once; one more sampled while this many are out is dropped
  // (counted as dropped_busy): audits must never add a queue of their own in front of the model.
  std::size_t max_in_flight = 4;
  double timeout_s = 30;  // the whole audit call; past it the audit is dropped (dropped_timeout)
  // The judge: the cached answer was right when its cosine to the fresh answer is at least this.
  // 0.6: about where the judge's two errors balance on a small real model's answers (cache/README.md
  // "Online audits", bench/RESULTS.md); the judge is weak there, so tune it per pool.
  double judge_threshold = 0.6;
  // Scopes whose audit evidence is kept (the least recently judged is forgotten beyond this).
  std::size_t max_scopes = 10000;
};

// One audit call: the client's request again, non-streamed, for the same model.
struct AuditRequest {
  std::string path;   // "/v1/chat/completions" or "/v1/completions"
  std::string body;   // JSON text, "stream": false
  std::string model;
  std::string tenant;
};

struct AuditResponse {
  enum class Outcome { kAnswered, kError, kTimeout };
  Outcome outcome = Outcome::kError;
  int status = 0;     // kAnswered: the HTTP status
  std::string body;   // kAnswered: the response body
  std::string error;  // why, when not answered
};

// Sends an audit to the model and calls `done` exactly once, from any thread, within about
// timeout_s. Installed by the gateway (SemanticCache::set_audit_fetch); must not throw.
using AuditFetch =
    std::function<void(const AuditRequest& request, double timeout_s, std::function<void(AuditResponse)> done)>;

}  // namespace tidegate::cache
