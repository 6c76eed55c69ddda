#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "auditor.h"
#include "cache_metrics.h"
#include "deadline_watch.h"
#include "tidegate/cache/cache_config.h"
#include "tidegate/encoder/embed_batcher.h"
#include "tidegate/encoder/embedder.h"
#include "tidegate/cache/entry_store.h"
#include "tidegate/encoder/pair_verifier.h"
#include "tidegate/cache/persistence.h"
#include "tidegate/cache/semantic_cache.h"
#include "worker_pool.h"

namespace tidegate::cache {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The key of a lookup's vector in RecentVectors: the insert after a miss finds it by the same plan.
inline std::string vector_key(const CachePlan& plan) { return plan.scope_key + '\n' + plan.text; }

// Vectors embedded at lookup, kept briefly so the insert after a miss does not embed again.
class RecentVectors final {
 public:
  explicit RecentVectors(std::size_t capacity) : capacity_(capacity) {}
  void put(const std::string& key, std::vector<float> v);
  std::optional<std::vector<float>> get(const std::string& key);

 private:
  std::mutex mu_;
  std::size_t capacity_;
  std::list<std::string> order_;
  std::unordered_map<std::string, std::pair<std::vector<float>, std::list<std::string>::iterator>> map_;
};

// Which index the scopes use, decided once at construction (factory.cc).
struct IndexBackend {
  std::string name;             // gpu-flat | hnsw | flat: what big scopes actually use
  std::string fallback_reason;  // why gpu-flat was not used, when it was asked for
  EntryStore::IndexFactory gpu;
};
IndexBackend choose_index_backend(const IndexConfig& config, std::size_t dim);

class SemanticCacheImpl final : public SemanticCache {
 public:
  // `verifier`: null loads the pair verifier from config->verifier when a pool needs it; a
  // verifier that cannot be loaded is logged once and those pools decide on cosine.
  SemanticCacheImpl(std::shared_ptr<const CacheConfig> config, prometheus::Registry& registry,
                    std::shared_ptr<encoder::Embedder> embedder, std::shared_ptr<const encoder::PairScorer> verifier = nullptr);
  ~SemanticCacheImpl() override;

  CachePlan plan(const RequestView& request) const override;
  void lookup(const CachePlan& plan, std::chrono::steady_clock::time_point deadline,
              std::function<void(LookupResult)> done) override;
  void insert(const CachePlan& plan, CachedAnswer answer) override;
  void set_insert_listener(InsertListener listener) override { insert_listener_ = std::move(listener); }
  bool insert_from_peer(const CachePlan& plan, CachedAnswer answer, std::vector<float> vector) override;
  std::string embedder_id() const override { return embedder_id_; }
  boost::json::object stats() const override;
  std::size_t erase(const std::optional<std::string>& tenant, const std::optional<std::string>& model) override;
  bool erase_entry(std::uint64_t id) override;
  void shutdown() override;
  void flush() override { maintain(true); }
  void set_audit_fetch(AuditFetch fetch) override { auditor_->set_fetch(std::move(fetch)); }
  void audit(const CachePlan& plan, const LookupResult& hit, RequestView::Endpoint endpoint,
             const boost::json::object& body) override;

  // Runs one maintenance pass now (TTL, index rebuilds, fsync, snapshot if due); for tests.
  void maintain(bool force_snapshot);

 private:
  struct LookupState;
  void run_lookup(const std::shared_ptr<LookupState>& state, const CachePlan& plan, std::vector<float> v,
                  double embed_s);
  // `vector` empty: embed the text first. `from_peer`: another gateway's insert, not heard by the listener.
  void queue_insert(const CachePlan& plan, CachedAnswer answer, std::vector<float> vector, bool from_peer);
  void run_insert(const CachePlan& plan, const CachedAnswer& answer, std::vector<float> vector, bool from_peer);
  // The tiers behind the embedding (README "Tiers of a lookup"): candidates above the floor, the
  // lexical guard, the verifier, its calibrated threshold. Returns the match to serve, if any.
  std::optional<Match> verified_match(const CachePlan& plan, const float* v, std::int64_t now_ms,
                                      const Calibration& calibration, std::chrono::steady_clock::time_point deadline,
                                      LookupResult& r);
  // Claims the answer, counts it and serves it (a hit when `match`).
  void finish(const std::shared_ptr<LookupState>& state, LookupResult r, const std::optional<Match>& match,
              std::int64_t now_ms);
  void fail(const std::shared_ptr<LookupState>& state, const char* reason);
  void embed_failed(const std::shared_ptr<LookupState>& state, std::exception_ptr error);
  void load();
  // How this pool decides, the units of its audit evidence: "verifier" or "cosine".
  const char* decision_kind(const std::string& model) const;
  void log_erasures(const std::vector<std::uint64_t>& ids);
  EntryStore::EvictFn collector(std::vector<std::uint64_t>& ids);
  void maintenance_loop();
  void update_gauges();

  const std::shared_ptr<const CacheConfig> config_;
  const std::shared_ptr<encoder::Embedder> embedder_;
  std::shared_ptr<const encoder::PairScorer> verifier_;  // null: every pool decides on cosine
  std::string verifier_problem_;                // why the verifier is not used, when a pool wanted it
  mutable CacheMetrics metrics_;
  const IndexBackend index_backend_;
  EntryStore store_;
  std::unique_ptr<Persistence> persistence_;
  RecentVectors recent_{2048};
  InsertListener insert_listener_;  // set before the first insert (shared_cache.h)
  std::string embedder_id_;
  std::vector<std::string> load_problems_;
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, timeouts_{0}, embed_errors_{0};
  std::atomic<std::uint64_t> exact_hits_{0}, verified_hits_{0}, verifier_rejects_{0}, verifier_failures_{0};
  mutable std::atomic<std::uint64_t> bypasses_{0};
  std::uint64_t persist_errors_reported_ = 0;
  std::chrono::steady_clock::time_point last_snapshot_;
  std::mutex maint_mu_;  // one maintenance pass at a time
  std::atomic<bool> stopped_{false};
  DeadlineWatch watch_;
  WorkerPool workers_;
  std::unique_ptr<encoder::EmbedBatcher> batcher_;  // the encoder's threads; lookups then search on workers_
  std::unique_ptr<Auditor> auditor_;       // judges on batcher_, so declared after it
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_requested_ = false;
  std::thread maintenance_;
};

}  // namespace tidegate::cache
