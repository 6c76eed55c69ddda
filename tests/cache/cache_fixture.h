#pragma once
// A whole SemanticCache on the test embedder, with synchronous helpers around the async API.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <filesystem>
#include <future>

#include "test_embedder.h"
#include "tidegate/cache/cache_factory.h"

namespace tidegate::cache::fakes {

inline boost::json::object chat_body(const std::string& user, const std::string& system = "") {
  boost::json::array messages;
  if (!system.empty()) messages.push_back(boost::json::object{{"role", "system"}, {"content", system}});
  messages.push_back(boost::json::object{{"role", "user"}, {"content", user}});
  return boost::json::object{{"model", "m"}, {"messages", std::move(messages)}};
}

struct CacheHarness {
  std::shared_ptr<WordEmbedder> embedder = std::make_shared<WordEmbedder>(64);
  prometheus::Registry registry;
  std::unique_ptr<SemanticCache> cache;

  explicit CacheHarness(CacheConfig cfg, std::shared_ptr<const encoder::PairScorer> verifier = nullptr) {
    cfg.enabled = true;
    cache = make_semantic_cache(std::make_shared<const CacheConfig>(std::move(cfg)), registry, embedder,
                                std::move(verifier));
  }

  // A request for `model` from `tenant` with `body` (which must outlive the view).
  static RequestView view(const boost::json::object& body, const std::string& tenant = "t1",
                          const std::string& model = "m") {
    RequestView v;
    v.model = model;
    v.tenant = tenant;
    v.body = &body;
    return v;
  }
  CachePlan plan(const boost::json::object& body, const std::string& tenant = "t1", const std::string& model = "m") {
    return cache->plan(view(body, tenant, model));
  }
  LookupResult lookup(const CachePlan& p, std::chrono::milliseconds budget = std::chrono::seconds(5)) {
    std::promise<LookupResult> done;
    auto f = done.get_future();
    cache->lookup(p, std::chrono::steady_clock::now() + budget, [&done](LookupResult r) { done.set_value(std::move(r)); });
    return f.get();
  }
  // insert() is asynchronous; wait until the entry is visible.
  void insert_and_wait(const CachePlan& p, const std::string& content, const std::string& finish = "stop") {
    const auto before = cache->stats().at("entries").as_uint64();
    const auto inserts_before = counter("tidegate_cache_inserts_total");
    cache->insert(p, CachedAnswer{content, finish, 10, 20});
    for (int i = 0; i < 500 && counter("tidegate_cache_inserts_total") == inserts_before; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    (void)before;
  }
  double counter(const std::string& name, const std::string& label = "") const {
    double sum = 0;
    for (const auto& fam : registry.Collect())
      if (fam.name == name)
        for (const auto& m : fam.metric) {
          bool match = label.empty();
          for (const auto& l : m.label) match = match || (l.name + "=" + l.value) == label;
          if (match) sum += m.counter.value;
        }
    return sum;
  }
  std::string metrics_text() const { return prometheus::TextSerializer().Serialize(registry.Collect()); }
};

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("tidegate-cache-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

}  // namespace tidegate::cache::fakes
