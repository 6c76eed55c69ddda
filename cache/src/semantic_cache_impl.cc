// The semantic cache's store and its life: loading from disk, inserts (own and peers'), erasures,
// stats and the maintenance thread (TTL, index rebuilds, snapshots). The request path (plan and
// lookup) is in semantic_cache_lookup.cc.
#include "semantic_cache_impl.h"

#include <filesystem>

#include "model_dir.h"
#include "tidegate/encoder/embed_batcher.h"
#include "tidegate/cache/policy.h"
#include "tidegate/common/log.h"
#include "tidegate/kernels/gpu.h"

namespace tidegate::cache {
namespace {

// auto/gpu: the verifier on the GPU when a device answers (its weights are `cpu`'s), else
// nullptr and one log line saying why, at warn level when the GPU was asked for explicitly.
std::shared_ptr<const encoder::PairScorer> load_gpu_verifier(EmbedderConfig::Device device,
                                                             const std::shared_ptr<const encoder::PairVerifier>& cpu) {
  if (device == EmbedderConfig::Device::kCpu) return nullptr;
  std::string why;
  if (auto gpu = kernels::make_gpu_pair_verifier(cpu, kernels::GpuVerifierOptions{}, &why)) {
    log::info("cache.verifier", {{"weights", cpu->weights_path()}, {"layers", cpu->layers()}, {"device", "gpu"}});
    return gpu;
  }
  const bool asked = device == EmbedderConfig::Device::kGpu;
  log::write(asked ? log::Level::kWarn : log::Level::kInfo, "cache.verifier_backend",
             {{"requested", asked ? "gpu" : "auto"}, {"device", "cpu"}, {"reason", why}});
  return nullptr;
}

// Loads the verifier the config asks for; on failure says why (logged once by the caller).
std::shared_ptr<const encoder::PairScorer> load_verifier(const CacheConfig& config, std::string& problem) {
  if (!config.verifier_needed()) return nullptr;
  try {
    const auto choice = choose_model_dir(config.embedder.type == "minilm" ? config.embedder.model_dir : "");
    if (!choice.error.empty()) throw std::runtime_error("MiniLM folder for the verifier's embeddings: " + choice.error);
    encoder::PairVerifierOptions o;
    o.precision = config.verifier.precision;
    o.intra_op_threads = config.verifier.intra_op_threads;
    std::shared_ptr<const encoder::PairVerifier> v =
        encoder::PairVerifier::load(config.verifier.dir, encoder::MiniLMModel::load(choice.dir), o);
    if (auto gpu = load_gpu_verifier(config.verifier.device, v)) return gpu;
    log::info("cache.verifier", {{"weights", v->weights_path()}, {"layers", v->layers()}, {"device", "cpu"},
                                 {"precision", v->precision()}, {"matrix_tiles", v->matrix_tiles()}});
    return v;
  } catch (const std::exception& e) {
    problem = e.what();
    return nullptr;
  }
}

}  // namespace

void RecentVectors::put(const std::string& key, std::vector<float> v) {
  std::lock_guard lock(mu_);
  if (auto it = map_.find(key); it != map_.end()) {
    order_.erase(it->second.second);
    map_.erase(it);
  }
  order_.push_front(key);
  map_.emplace(key, std::make_pair(std::move(v), order_.begin()));
  while (map_.size() > capacity_) {
    map_.erase(order_.back());
    order_.pop_back();
  }
}

std::optional<std::vector<float>> RecentVectors::get(const std::string& key) {
  std::lock_guard lock(mu_);
  const auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  return it->second.first;
}

SemanticCacheImpl::SemanticCacheImpl(std::shared_ptr<const CacheConfig> config, prometheus::Registry& registry,
                                     std::shared_ptr<encoder::Embedder> embedder, std::shared_ptr<const encoder::PairScorer> verifier)
    : config_(std::move(config)),
      embedder_(std::move(embedder)),
      verifier_(std::move(verifier)),
      metrics_(registry),
      index_backend_(choose_index_backend(config_->index, embedder_->dim())),
      store_(embedder_->dim(), config_->index, config_->max_entries, config_->max_bytes, index_backend_.gpu),
      workers_(config_->workers) {
  encoder::EmbedBatcherOptions bo;
  bo.threads = static_cast<std::size_t>(config_->embedder.threads);
  bo.max_batch = static_cast<std::size_t>(config_->embedder.max_batch);
  bo.max_queue = config_->max_queue;
  batcher_ = std::make_unique<encoder::EmbedBatcher>(embedder_, bo);
  auditor_ = std::make_unique<Auditor>(config_, registry, *batcher_);
  // What makes the vectors, for gateways that share inserts: the model (not where its folder
  // is) and the dimension. The CPU and GPU MiniLM encoders, fp32 or bf16, agree to about 1e-3.
  const auto& ec = config_->embedder;
  auto folder = std::filesystem::path(ec.model_dir).lexically_normal();
  if (folder.filename().empty()) folder = folder.parent_path();  // "…/all-MiniLM-L6-v2/"
  const std::string model = ec.type == "minilm" ? folder.filename().string()
                            : ec.type == "openai" ? ec.model
                                                  : std::string();
  embedder_id_ = ec.type + "/" + model + "/" + std::to_string(embedder_->dim());
  if (!verifier_ && config_->verifier_needed()) {
    verifier_ = load_verifier(*config_, verifier_problem_);
    // Once, at start: the pools that asked for a false-hit bound fall back to cosine `threshold`.
    if (!verifier_)
      log::error("cache.verifier_unavailable", {{"error", verifier_problem_}, {"fallback", "cosine threshold"},
                                                {"threshold", config_->threshold}});
  }
  load();
  last_snapshot_ = Clock::now();
  maintenance_ = std::thread([this] { maintenance_loop(); });
}

SemanticCacheImpl::~SemanticCacheImpl() { shutdown(); }

void SemanticCacheImpl::load() {
  if (config_->data_dir.empty()) return;
  try {
    persistence_ = std::make_unique<Persistence>(config_->data_dir);
    auto loaded = persistence_->load(embedder_->dim());
    const auto now = now_unix_ms();
    std::size_t restored = 0, expired = 0;
    for (auto& e : loaded.entries) {
      if (e.expired(now)) {
        ++expired;
        continue;
      }
      store_.insert(std::move(e), {});
      ++restored;
    }
    load_problems_ = std::move(loaded.problems);
    if (auto problem = auditor_->load(config_->data_dir); !problem.empty()) load_problems_.push_back(problem);
    for (const auto& p : load_problems_) log::error("cache.load_problem", {{"dir", config_->data_dir}, {"problem", p}});
    log::info("cache.loaded", {{"dir", config_->data_dir}, {"entries", restored}, {"expired", expired},
                               {"problems", load_problems_.size()}});
    // Fold the replayed logs into one snapshot so the next start reads one file.
    persistence_->snapshot([this] { return store_.copy_all(); });
  } catch (const std::exception& e) {
    log::error("cache.data_dir_unusable", {{"dir", config_->data_dir}, {"error", e.what()}});
    load_problems_.push_back(std::string("data_dir unusable: ") + e.what());
    persistence_.reset();  // serve from memory only
  }
  update_gauges();
}

void SemanticCacheImpl::insert(const CachePlan& plan, CachedAnswer answer) {
  queue_insert(plan, std::move(answer), {}, false);
}

bool SemanticCacheImpl::insert_from_peer(const CachePlan& plan, CachedAnswer answer, std::vector<float> vector) {
  const bool usable = vector.size() == embedder_->dim();
  if (!usable) vector.clear();  // another embedder's (or none): embed the text here
  queue_insert(plan, std::move(answer), std::move(vector), true);
  return usable;
}

void SemanticCacheImpl::queue_insert(const CachePlan& plan, CachedAnswer answer, std::vector<float> vector,
                                     bool from_peer) {
  if (!plan.write || stopped_) return;
  // Errors, tool calls and answers cut short (client gone, content_filter) are never stored.
  if ((answer.finish_reason != "stop" && answer.finish_reason != "length") || answer.content.empty() ||
      !is_valid_utf8(answer.content)) {
    metrics_.insert_skipped.Increment();
    return;
  }
  auto store = [this, plan, from_peer](CachedAnswer a, std::vector<float> v) {
    const bool queued = workers_.post(
        [this, plan, from_peer, a = std::move(a), v = std::move(v)](bool) mutable {
          run_insert(plan, a, std::move(v), from_peer);
        },
        config_->max_queue);
    if (!queued) metrics_.insert_skipped.Increment();
  };
  if (!vector.empty()) return store(std::move(answer), std::move(vector));
  if (auto v = recent_.get(vector_key(plan))) return store(std::move(answer), std::move(*v));
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(config_->embedder.timeout_s));
  batcher_->submit(plan.text, deadline,
                   [this, store, answer = std::move(answer)](std::vector<float> v, std::exception_ptr error) mutable {
                     if (error) {
                       metrics_.insert_skipped.Increment();
                       return;
                     }
                     store(std::move(answer), std::move(v));
                   });
}

EntryStore::EvictFn SemanticCacheImpl::collector(std::vector<std::uint64_t>& ids) {
  return [this, &ids](const Entry& e, EvictReason why) {
    ids.push_back(e.id);
    metrics_.evicted(to_string(why));
  };
}

void SemanticCacheImpl::log_erasures(const std::vector<std::uint64_t>& ids) {
  if (!persistence_) return;
  for (auto id : ids) persistence_->append_erase(id);
}

void SemanticCacheImpl::run_insert(const CachePlan& plan, const CachedAnswer& answer, std::vector<float> vector,
                                   bool from_peer) {
  if (vector.size() != embedder_->dim()) {
    metrics_.insert_skipped.Increment();
    return;
  }
  if (!from_peer && insert_listener_) insert_listener_(plan, answer, vector);
  Entry e;
  e.vector = std::move(vector);
  e.id = store_.next_id();
  e.scope_key = plan.scope_key;
  e.model = plan.model;
  e.tenant = plan.tenant;
  e.text = plan.text;
  e.answer = answer;
  e.created_ms = e.last_hit_ms = now_unix_ms();
  e.ttl_s = plan.ttl_s > 0 ? plan.ttl_s : config_->ttl_for(plan.model);
  std::vector<std::uint64_t> evicted;
  // The store first, the log second: see persistence.h for why this order is safe.
  const Entry copy = persistence_ ? e : Entry{};
  store_.insert(std::move(e), collector(evicted));
  if (persistence_) persistence_->append_insert(copy);
  log_erasures(evicted);
  update_gauges();
  metrics_.inserts.Increment();
}

boost::json::object SemanticCacheImpl::stats() const {
  boost::json::object s;
  s["entries"] = store_.size();
  s["bytes"] = store_.bytes();
  s["scopes"] = store_.scopes();
  s["max_entries"] = config_->max_entries;
  s["max_bytes"] = config_->max_bytes;
  s["hits"] = hits_.load();
  s["misses"] = misses_.load();
  s["bypasses"] = bypasses_.load();
  s["timeouts"] = timeouts_.load();
  s["embed_errors"] = embed_errors_.load();
  s["embedder"] = embedder_->name();
  s["dim"] = embedder_->dim();
  // Backends actually in use, after any GPU fallback (the config says what was asked for).
  s["embedder_device"] = embedder_->name().ends_with("-gpu") ? "gpu" : "cpu";
  s["index"] = index_backend_.name;
  if (!index_backend_.fallback_reason.empty()) s["index_fallback_reason"] = index_backend_.fallback_reason;
  s["gpu_scopes"] = store_.gpu_scopes();
  s["threshold"] = config_->threshold;
  boost::json::object tiers;
  tiers["exact_tier"] = config_->exact_tier;
  tiers["exact_hits"] = exact_hits_.load();
  if (config_->verifier_needed()) {
    tiers["verifier"] = verifier_ ? verifier_->name() : "unavailable";
    if (!verifier_problem_.empty()) tiers["verifier_problem"] = verifier_problem_;
    tiers["verifier_dir"] = config_->verifier.dir;
    tiers["candidates"] = config_->verifier.candidates;
    tiers["floor"] = config_->verifier.floor;
    tiers["verified_hits"] = verified_hits_.load();
    tiers["verifier_rejects"] = verifier_rejects_.load();
    tiers["verifier_failures"] = verifier_failures_.load();
    if (config_->max_false_hit_rate && config_->calibration) {
      tiers["max_false_hit_rate"] = *config_->max_false_hit_rate;
      tiers["probability_threshold"] = config_->calibration->threshold;
      tiers["calibration_upper_bound"] = config_->calibration->upper_bound;
    }
    boost::json::object pools;
    for (const auto& [name, m] : config_->models)
      if (m.calibration)
        pools[name] = boost::json::object{{"max_false_hit_rate", *m.max_false_hit_rate},
                                          {"probability_threshold", m.calibration->threshold},
                                          {"calibration_upper_bound", m.calibration->upper_bound}};
    if (!pools.empty()) tiers["models"] = std::move(pools);
  }
  s["tiers"] = std::move(tiers);
  s["audit"] = auditor_->stats();
  s["queued"] = workers_.queued();
  boost::json::object p;
  p["data_dir"] = config_->data_dir;
  p["enabled"] = persistence_ != nullptr;
  if (persistence_) {
    p["log_bytes"] = persistence_->log_bytes();
    p["write_errors"] = persistence_->write_errors();
  }
  boost::json::array problems;
  for (const auto& x : load_problems_) problems.emplace_back(x);
  p["load_problems"] = std::move(problems);
  s["persistence"] = std::move(p);
  return s;
}

std::size_t SemanticCacheImpl::erase(const std::optional<std::string>& tenant,
                                     const std::optional<std::string>& model) {
  std::vector<std::uint64_t> ids;
  const auto n = store_.erase_matching(tenant, model, collector(ids));
  log_erasures(ids);
  update_gauges();
  return n;
}

bool SemanticCacheImpl::erase_entry(std::uint64_t id) {
  std::vector<std::uint64_t> ids;
  const bool ok = store_.erase(id, collector(ids));
  log_erasures(ids);
  update_gauges();
  return ok;
}

void SemanticCacheImpl::update_gauges() {
  metrics_.entries.Set(static_cast<double>(store_.size()));
  metrics_.bytes.Set(static_cast<double>(store_.bytes()));
}

void SemanticCacheImpl::maintain(bool force_snapshot) {
  std::lock_guard lock(maint_mu_);
  std::vector<std::uint64_t> ids;
  store_.expire(now_unix_ms(), collector(ids));
  log_erasures(ids);
  store_.maintain_indexes();
  update_gauges();
  if (!persistence_) return;
  persistence_->sync();
  if (std::string error; !auditor_->save(config_->data_dir, &error)) {
    metrics_.persist_error("audit");
    log::error("cache.audit_save_failed", {{"error", error}});
  }
  const bool due = seconds_since(last_snapshot_) >= config_->snapshot_interval_s ||
                   persistence_->log_bytes() >= config_->snapshot_log_bytes;
  if (force_snapshot || due) {
    persistence_->snapshot([this] { return store_.copy_all(); });
    last_snapshot_ = Clock::now();
  }
  const auto errors = persistence_->write_errors();
  if (errors > persist_errors_reported_) {
    for (auto i = persist_errors_reported_; i < errors; ++i) metrics_.persist_error("write");
    persist_errors_reported_ = errors;
  }
}

void SemanticCacheImpl::maintenance_loop() {
  std::unique_lock lock(stop_mu_);
  while (!stop_requested_) {
    stop_cv_.wait_for(lock, std::chrono::seconds(1));
    if (stop_requested_) break;
    lock.unlock();
    try {
      maintain(false);
    } catch (const std::exception& e) {
      log::error("cache.maintenance_failed", {{"error", e.what()}});
    }
    lock.lock();
  }
}

void SemanticCacheImpl::shutdown() {
  if (stopped_.exchange(true)) return;
  {
    std::lock_guard lock(stop_mu_);
    stop_requested_ = true;
  }
  stop_cv_.notify_all();
  if (maintenance_.joinable()) maintenance_.join();
  auditor_->shutdown();  // before the batcher: audits still out no longer embed
  batcher_->shutdown();  // queued texts fail with kShutdown; running batches finish
  workers_.stop();       // queued lookups answer "shutdown", queued inserts still run
  watch_.stop();
  try {
    maintain(true);
  } catch (const std::exception& e) {
    log::error("cache.final_flush_failed", {{"error", e.what()}});
  }
}

}  // namespace tidegate::cache
