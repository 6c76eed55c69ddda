// SharedCache (tidegate/cache/shared_cache.h): a decorator over the local cache that publishes
// its changes to the fleet's cache stream (redis::EventStream) and applies the other gateways'.
#include "tidegate/cache/shared_cache.h"

#include <prometheus/counter.h>

#include <chrono>
#include <cstring>

#include "tidegate/redis/config.h"
#include "tidegate/redis/event_stream.h"

namespace tidegate::cache {
namespace {

using Fields = redis::EventStream::Fields;

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// A CachePlan and CachedAnswer as stream fields, and back.
void put_insert(std::vector<std::string>& args, const CachePlan& p, const CachedAnswer& a) {
  for (auto [k, v] : {std::pair<const char*, std::string>{"op", "insert"}, {"model", p.model}, {"tenant", p.tenant},
                      {"scope", p.scope_key}, {"text", p.text}, {"ttl", num(p.ttl_s)}, {"content", a.content},
                      {"finish", a.finish_reason}, {"pt", std::to_string(a.prompt_tokens)},
                      {"ct", std::to_string(a.completion_tokens)}}) {
    args.emplace_back(k);
    args.push_back(std::move(v));
  }
}

std::pair<CachePlan, CachedAnswer> get_insert(const Fields& f) {
  const auto at = [&f](const char* k) {
    const auto it = f.find(k);
    return it == f.end() ? std::string() : it->second;
  };
  CachePlan p;
  p.read = p.write = true;
  p.status_without_hit = CacheStatus::kMiss;
  p.model = at("model");
  p.tenant = at("tenant");
  p.scope_key = at("scope");
  p.text = at("text");
  p.ttl_s = std::strtod(at("ttl").c_str(), nullptr);
  CachedAnswer a;
  a.content = at("content");
  a.finish_reason = at("finish");
  a.prompt_tokens = std::strtoll(at("pt").c_str(), nullptr, 10);
  a.completion_tokens = std::strtoll(at("ct").c_str(), nullptr, 10);
  return {std::move(p), std::move(a)};
}

struct Metrics {
  // Before `stream`: its initializer writes this one (members initialise in declaration order).
  prometheus::Counter* vector_reused = nullptr;
  redis::StreamCounters stream;
  explicit Metrics(prometheus::Registry* r)
      : stream(redis::register_stream_counters(
            r, "tidegate_cache_shared_events_total",
            "Cache inserts and erasures shared through the Redis stream: published, publish_failed (Redis down: "
            "local only), applied (another gateway's), missed (trimmed before this gateway read them), "
            "vector_reused (another gateway's insert stored with its vector, not embedded again)",
            {{"vector_reused", &vector_reused}})) {}
};

class SharedCache final : public SemanticCache {
 public:
  SharedCache(std::shared_ptr<SemanticCache> local, std::shared_ptr<redis::Client> publisher,
              std::shared_ptr<redis::Client> reader, const redis::RedisConfig& config, prometheus::Registry* registry)
      : local_(std::move(local)), metrics_(registry) {
    // The stream holds the local cache, not this decorator: applying an event never publishes it again.
    stream_ = redis::EventStream::start(std::move(publisher), std::move(reader),
                                        {config.key_prefix + ":cache", config.cache_stream_max_len, "cache"}, metrics_.stream,
                                        [local = local_, id = local_->embedder_id(),
                                         reused = metrics_.vector_reused](const redis::EventStream::Fields& f) {
                                          return apply(*local, id, f, reused);
                                        });
    // An insert is published once its text is embedded, with the vector: the other gateways
    // store it without embedding it again (a MiniLM embed is milliseconds of CPU on each).
    // Weak: the local cache must not keep the stream (which holds the local cache) alive.
    local_->set_insert_listener([weak = std::weak_ptr<redis::EventStream>(stream_), id = local_->embedder_id()](
                                    const CachePlan& plan, const CachedAnswer& answer, const std::vector<float>& vector) {
      const auto stream = weak.lock();
      if (!stream) return;
      std::vector<std::string> fields;
      put_insert(fields, plan, answer);
      if (!id.empty()) {
        fields.insert(fields.end(), {"emb", id, "vec", std::string(reinterpret_cast<const char*>(vector.data()),
                                                                   vector.size() * sizeof(float))});
      }
      stream->publish(std::move(fields));
    });
  }

  CachePlan plan(const RequestView& r) const override { return local_->plan(r); }
  void lookup(const CachePlan& plan, std::chrono::steady_clock::time_point deadline,
              std::function<void(LookupResult)> done) override {
    local_->lookup(plan, deadline, std::move(done));
  }
  // Published by the insert listener once embedded (an answer the cache refuses to store, or
  // whose text cannot be embedded, is not published at all).
  void insert(const CachePlan& plan, CachedAnswer answer) override { local_->insert(plan, std::move(answer)); }
  boost::json::object stats() const override { return local_->stats(); }
  std::size_t erase(const std::optional<std::string>& tenant, const std::optional<std::string>& model) override {
    // "-" marks "any": an empty tenant is a real scope (a shared pool).
    stream_->publish({"op", "erase", "tenant", tenant ? "=" + *tenant : "-", "model", model ? "=" + *model : "-"});
    return local_->erase(tenant, model);
  }
  bool erase_entry(std::uint64_t id) override { return local_->erase_entry(id); }
  void flush() override { local_->flush(); }
  bool insert_from_peer(const CachePlan& plan, CachedAnswer answer, std::vector<float> vector) override {
    return local_->insert_from_peer(plan, std::move(answer), std::move(vector));
  }
  std::string embedder_id() const override { return local_->embedder_id(); }
  void set_audit_fetch(AuditFetch fetch) override { local_->set_audit_fetch(std::move(fetch)); }
  void audit(const CachePlan& plan, const LookupResult& hit, RequestView::Endpoint endpoint,
             const boost::json::object& body) override {
    local_->audit(plan, hit, endpoint, body);
  }
  void shutdown() override {
    stream_->stop();
    local_->shutdown();
  }

 private:
  // Another gateway's event, on the stream reader's strand.
  // `id`: the local embedder's name, taken once.
  static bool apply(SemanticCache& local, const std::string& id, const redis::EventStream::Fields& f,
                    prometheus::Counter* reused) {
    const auto op = f.find("op");
    if (op == f.end()) return false;
    if (op->second == "insert") {
      auto [plan, answer] = get_insert(f);
      // The sender's vector, when made by the same embedder (host float layout: one fleet runs
      // one build); otherwise insert_from_peer embeds the text here.
      std::vector<float> vector;
      const auto emb = f.find("emb");
      const auto vec = f.find("vec");
      if (emb != f.end() && vec != f.end() && !id.empty() && emb->second == id &&
          vec->second.size() % sizeof(float) == 0) {
        vector.resize(vec->second.size() / sizeof(float));
        std::memcpy(vector.data(), vec->second.data(), vec->second.size());
      }
      if (local.insert_from_peer(plan, std::move(answer), std::move(vector)) && reused) reused->Increment();
      return true;
    }
    if (op->second == "erase") {
      const auto opt = [&f](const char* k) -> std::optional<std::string> {
        const auto it = f.find(k);
        return it != f.end() && it->second.rfind("=", 0) == 0 ? std::optional(it->second.substr(1)) : std::nullopt;
      };
      local.erase(opt("tenant"), opt("model"));
      return true;
    }
    return false;
  }

  std::shared_ptr<SemanticCache> local_;
  Metrics metrics_;
  std::shared_ptr<redis::EventStream> stream_;
};

}  // namespace

std::shared_ptr<SemanticCache> make_shared_cache(std::shared_ptr<SemanticCache> local,
                                                 std::shared_ptr<redis::Client> publisher,
                                                 std::shared_ptr<redis::Client> reader,
                                                 std::shared_ptr<const redis::RedisConfig> config,
                                                 prometheus::Registry* registry) {
  return std::make_shared<SharedCache>(std::move(local), std::move(publisher), std::move(reader), *config, registry);
}

}  // namespace tidegate::cache
