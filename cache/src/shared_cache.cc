// SharedCache (tidegate/cache/shared_cache.h): a decorator over the local cache that publishes
// its changes to a Redis stream and applies the other gateways' changes read from it.
#include "tidegate/cache/shared_cache.h"

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

#include "tidegate/common/log.h"
#include "tidegate/redis/client.h"
#include "tidegate/redis/shared_totals.h"

namespace tidegate::cache {
namespace {

namespace asio = boost::asio;
using Fields = std::map<std::string, std::string>;

constexpr double kBlockS = 1.0;     // one XREAD waits this long for news, then asks again
constexpr double kRetryS = 0.25;    // after a failed read (Redis down): the client fails fast

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
  prometheus::Counter* published = nullptr;
  prometheus::Counter* publish_failed = nullptr;
  prometheus::Counter* applied = nullptr;
  prometheus::Counter* missed = nullptr;
  explicit Metrics(prometheus::Registry* r) {
    if (!r) return;
    auto& f = prometheus::BuildCounter().Name("tidegate_cache_shared_events_total")
                  .Help("Cache inserts and erasures shared through the Redis stream: published, publish_failed "
                        "(Redis down: local only), applied (another gateway's), missed (trimmed before this "
                        "gateway read them)")
                  .Register(*r);
    published = &f.Add({{"event", "published"}});
    publish_failed = &f.Add({{"event", "publish_failed"}});
    applied = &f.Add({{"event", "applied"}});
    missed = &f.Add({{"event", "missed"}});
  }
};

class SharedCache final : public SemanticCache, public std::enable_shared_from_this<SharedCache> {
 public:
  SharedCache(std::shared_ptr<SemanticCache> local, std::shared_ptr<redis::Client> publisher,
              std::shared_ptr<redis::Client> reader, std::shared_ptr<const redis::RedisConfig> config,
              prometheus::Registry* registry)
      : local_(std::move(local)), publisher_(std::move(publisher)), reader_(std::move(reader)),
        config_(std::move(config)), key_(config_->key_prefix + ":cache"), id_(redis::random_gateway_id()),
        metrics_(registry) {}

  void start() {
    log::info("cache.shared_stream_start", {{"stream", key_}, {"gateway_id", id_}});
    read_next();
  }

  CachePlan plan(const RequestView& r) const override { return local_->plan(r); }
  void lookup(const CachePlan& plan, std::chrono::steady_clock::time_point deadline,
              std::function<void(LookupResult)> done) override {
    local_->lookup(plan, deadline, std::move(done));
  }
  void insert(const CachePlan& plan, CachedAnswer answer) override {
    if (plan.write) {
      std::vector<std::string> args;
      put_insert(args, plan, answer);
      publish(std::move(args));
    }
    local_->insert(plan, std::move(answer));
  }
  boost::json::object stats() const override { return local_->stats(); }
  std::size_t erase(const std::optional<std::string>& tenant, const std::optional<std::string>& model) override {
    // "-" marks "any": an empty tenant is a real scope (a shared pool).
    publish({"op", "erase", "tenant", tenant ? "=" + *tenant : "-", "model", model ? "=" + *model : "-"});
    return local_->erase(tenant, model);
  }
  bool erase_entry(std::uint64_t id) override { return local_->erase_entry(id); }
  void flush() override { local_->flush(); }
  void set_audit_fetch(AuditFetch fetch) override { local_->set_audit_fetch(std::move(fetch)); }
  void audit(const CachePlan& plan, const LookupResult& hit, RequestView::Endpoint endpoint,
             const boost::json::object& body) override {
    local_->audit(plan, hit, endpoint, body);
  }
  void shutdown() override {
    stopped_ = true;
    reader_->stop();  // ends the XREAD in flight
    local_->shutdown();
  }

 private:
  void publish(std::vector<std::string> fields) {
    if (stopped_) return;
    std::vector<std::string> args{"XADD", key_, "MAXLEN", "~", std::to_string(config_->cache_stream_max_len), "*",
                                  "origin", id_, "seq", std::to_string(++seq_)};
    for (auto& f : fields) args.push_back(std::move(f));
    publisher_->command(std::move(args), [m = metrics_](redis::Result r) {
      if (auto* c = r.ok() ? m.published : m.publish_failed) c->Increment();
    });
  }

  void read_next() {
    if (stopped_) return;
    reader_->command({"XREAD", "COUNT", "256", "BLOCK", std::to_string(static_cast<int>(kBlockS * 1000)), "STREAMS",
                      key_, last_id_},
                     [weak = weak_from_this()](redis::Result r) {
                       if (auto self = weak.lock()) self->on_read(r);
                     },
                     kBlockS + config_->command_timeout_s + 1.0);
  }

  // On the reader's strand.
  void on_read(const redis::Result& r) {
    if (stopped_) return;
    if (!r.ok()) {  // Redis down or slow: local only until it answers again
      auto timer = std::make_shared<asio::steady_timer>(reader_->executor(), std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(kRetryS)));
      timer->async_wait([weak = weak_from_this(), timer](boost::system::error_code ec) {
        if (auto self = weak.lock(); self && !ec) self->read_next();
      });
      return;
    }
    // Nil: nothing new within the block. Otherwise [[stream, [[id, [field, value, ...]], ...]]].
    if (r.reply.type == redis::Reply::Type::kArray)
      for (const auto& stream : r.reply.elements)
        if (stream.elements.size() == 2)
          for (const auto& entry : stream.elements[1].elements) apply(entry);
    read_next();
  }

  void apply(const redis::Reply& entry) {
    if (entry.elements.size() != 2) return;
    last_id_ = entry.elements[0].str;
    Fields f;
    const auto& kv = entry.elements[1].elements;
    for (std::size_t i = 0; i + 1 < kv.size(); i += 2) f[kv[i].str] = kv[i + 1].str;
    const auto origin = f["origin"];
    if (origin == id_) return;
    note_sequence(origin, std::strtoull(f["seq"].c_str(), nullptr, 10));
    if (f["op"] == "insert") {
      auto [plan, answer] = get_insert(f);
      local_->insert(plan, std::move(answer));
    } else if (f["op"] == "erase") {
      const auto opt = [](const std::string& v) { return v.rfind("=", 0) == 0 ? std::optional(v.substr(1)) : std::nullopt; };
      local_->erase(opt(f["tenant"]), opt(f["model"]));
    } else {
      return;
    }
    if (metrics_.applied) metrics_.applied->Increment();
  }

  // A gap in a gateway's numbering: events trimmed (or written while this reader was away).
  void note_sequence(const std::string& origin, std::uint64_t seq) {
    auto& last = last_seq_[origin];
    if (last != 0 && seq > last + 1) {
      const auto missed = seq - last - 1;
      if (metrics_.missed) metrics_.missed->Increment(static_cast<double>(missed));
      log::warn("cache.shared_stream_behind", {{"origin", origin}, {"missed", missed},
                                               {"why", "trimmed before this gateway read them; carrying on"}});
    }
    if (seq > last) last = seq;
  }

  std::shared_ptr<SemanticCache> local_;
  std::shared_ptr<redis::Client> publisher_;
  std::shared_ptr<redis::Client> reader_;
  std::shared_ptr<const redis::RedisConfig> config_;
  std::string key_;
  std::string id_;
  Metrics metrics_;
  std::atomic<std::uint64_t> seq_{0};
  std::atomic<bool> stopped_{false};
  // The reader's strand only:
  std::string last_id_ = "$";  // only what is added from now on; then the last id read
  std::map<std::string, std::uint64_t> last_seq_;
};

}  // namespace

std::shared_ptr<SemanticCache> make_shared_cache(std::shared_ptr<SemanticCache> local,
                                                 std::shared_ptr<redis::Client> publisher,
                                                 std::shared_ptr<redis::Client> reader,
                                                 std::shared_ptr<const redis::RedisConfig> config,
                                                 prometheus::Registry* registry) {
  auto c = std::make_shared<SharedCache>(std::move(local), std::move(publisher), std::move(reader), std::move(config),
                                         registry);
  c->start();
  return c;
}

}  // namespace tidegate::cache
