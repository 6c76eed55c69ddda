#include <gtest/gtest.h>

#include "test_embedder.h"
#include "tidegate/cache/entry_store.h"

using namespace tidegate::cache;
namespace encoder = tidegate::encoder;

namespace {

fakes::WordEmbedder words(32);

Entry make(const std::string& scope, const std::string& text, const std::string& answer, double ttl = 3600) {
  Entry e;
  e.scope_key = scope;
  e.model = "m";
  e.tenant = "t";
  e.text = text;
  e.answer.content = answer;
  e.created_ms = e.last_hit_ms = now_unix_ms();
  e.ttl_s = ttl;
  e.vector = words.one(text);
  return e;
}

}  // namespace

// The global nearest neighbours all belong to other scopes; the store must still answer from
// (and only from) the query's own scope.
TEST(EntryStore, NeverCrossesScopesEvenWhenOthersFillTheTopK) {
  EntryStore store(32, IndexConfig{}, 10000, 1ull << 30);
  for (int i = 0; i < 200; ++i) store.insert(make("scope-" + std::to_string(i), "what is the capital of france", "x" + std::to_string(i)), {});
  store.insert(make("mine", "tell me a joke about cats", "mine"), {});
  const auto q = words.one("what is the capital of france");
  const auto m = store.best("mine", q.data(), now_unix_ms());
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->entry.answer.content, "mine");
  EXPECT_LT(m->similarity, 0.5f);
  EXPECT_FALSE(store.best("nobody", q.data(), now_unix_ms()).has_value());
  const auto s7 = store.best("scope-7", q.data(), now_unix_ms());
  ASSERT_TRUE(s7.has_value());
  EXPECT_EQ(s7->entry.answer.content, "x7");
}

TEST(EntryStore, TtlExpiry) {
  EntryStore store(32, IndexConfig{}, 100, 1ull << 30);
  auto old = make("s", "old question here", "old", 10);
  old.created_ms -= 20000;
  store.insert(old, {});
  store.insert(make("s", "new question here", "new", 10), {});
  const auto q = words.one("old question here");
  const auto m = store.best("s", q.data(), now_unix_ms());
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->entry.answer.content, "new");  // the expired best match is skipped
  std::vector<std::string> evicted;
  EXPECT_EQ(store.expire(now_unix_ms(), [&](const Entry& e, EvictReason r) {
    evicted.push_back(e.answer.content + ":" + std::string(to_string(r)));
  }), 1u);
  EXPECT_EQ(evicted, std::vector<std::string>{"old:ttl"});
  EXPECT_EQ(store.size(), 1u);
}

TEST(EntryStore, LruCapOnEntries) {
  EntryStore store(32, IndexConfig{}, 3, 1ull << 30);
  store.insert(make("s", "one", "1"), {});
  store.insert(make("s", "two", "2"), {});
  store.insert(make("s", "three", "3"), {});
  const auto q1 = words.one("one");
  const auto first = store.best("s", q1.data(), now_unix_ms());
  store.touch(first->entry.id, now_unix_ms());  // "one" is now the most recently used
  std::vector<std::string> evicted;
  store.insert(make("s", "four", "4"), [&](const Entry& e, EvictReason r) {
    EXPECT_EQ(r, EvictReason::kEntries);
    evicted.push_back(e.answer.content);
  });
  EXPECT_EQ(evicted, std::vector<std::string>{"2"});
  EXPECT_EQ(store.size(), 3u);
}

TEST(EntryStore, LruCapOnBytes) {
  const auto one = make("s", "a", std::string(1000, 'x')).bytes();
  EntryStore store(32, IndexConfig{}, 1000, one * 2 + 10);
  int evictions = 0;
  auto count = [&](const Entry&, EvictReason r) {
    EXPECT_EQ(r, EvictReason::kBytes);
    ++evictions;
  };
  store.insert(make("s", "a", std::string(1000, 'x')), count);
  store.insert(make("s", "b", std::string(1000, 'x')), count);
  store.insert(make("s", "c", std::string(1000, 'x')), count);
  EXPECT_EQ(evictions, 1);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_LE(store.bytes(), one * 2 + 10);
}

TEST(EntryStore, SameTextReplacesAndEraseFilters) {
  EntryStore store(32, IndexConfig{}, 100, 1ull << 30);
  store.insert(make("s", "same question", "first"), {});
  store.insert(make("s", "same question", "second"), {});
  EXPECT_EQ(store.size(), 1u);
  const auto q = words.one("same question");
  EXPECT_EQ(store.best("s", q.data(), now_unix_ms())->entry.answer.content, "second");
  auto other = make("s2", "x", "y");
  other.tenant = "t2";
  store.insert(other, {});
  EXPECT_EQ(store.erase_matching(std::string("t2"), std::nullopt, {}), 1u);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.erase_matching(std::nullopt, std::string("m"), {}), 1u);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.scopes(), 0u);
}

TEST(EntryStore, BigScopeIsPromotedToHnsw) {
  IndexConfig cfg;
  cfg.flat_max = 50;
  EntryStore store(32, cfg, 1000, 1ull << 30);
  for (int i = 0; i < 80; ++i) store.insert(make("s", "question number " + std::to_string(i) + " w" + std::to_string(i * 7), std::to_string(i)), {});
  EXPECT_EQ(store.maintain_indexes(), 1u);
  const auto q = words.one("question number 33 w231");
  const auto m = store.best("s", q.data(), now_unix_ms());
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->entry.answer.content, "33");
}

// The move of a big scope to a GPU index, with a FAISS flat index standing in for the CUDA one
// (the real one is exercised by cache.backends on a GPU host): the moved scope keeps answering
// from its own entries only, removals reach the new index, small scopes stay on the CPU, and a
// factory that fails leaves the scope on the CPU.
TEST(EntryStore, BigScopeMovesToGpuIndexAndStaysIsolated) {
  IndexConfig cfg;
  cfg.type = IndexConfig::Type::kGpuFlat;
  cfg.flat_max = 8;
  int made = 0;
  bool fail = false;
  EntryStore store(32, cfg, 10000, 1ull << 30, [&]() -> std::unique_ptr<encoder::VectorIndex> {
    if (fail) return nullptr;
    ++made;
    return std::make_unique<FaissVectorIndex>(32, IndexConfig{}, IndexConfig::Type::kFlat);
  });
  for (int i = 0; i < 8; ++i) store.insert(make("big", "question number " + std::string(1, char('a' + i)) + " about cats", "big"), {});
  EXPECT_EQ(store.gpu_scopes(), 0u);  // at flat_max: still on the CPU
  store.insert(make("other", "what is the capital of france", "other"), {});
  store.insert(make("big", "tell me about the weather in paris", "big-weather"), {});
  EXPECT_EQ(store.gpu_scopes(), 1u);
  EXPECT_EQ(made, 1);
  const auto q = words.one("what is the capital of france");
  const auto other = store.best("other", q.data(), now_unix_ms());
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->entry.answer.content, "other");
  const auto w = words.one("tell me about the weather in paris");
  auto big = store.best("big", w.data(), now_unix_ms());
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(big->entry.answer.content, "big-weather");
  EXPECT_GT(big->similarity, 0.99f);
  // Removal reaches the GPU index: the best match is now some other entry of the same scope.
  ASSERT_TRUE(store.erase(big->entry.id, {}));
  big = store.best("big", w.data(), now_unix_ms());
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(big->entry.answer.content, "big");
  EXPECT_EQ(store.maintain_indexes(), 0u);  // nothing to rebuild on the GPU
  // A failing factory keeps the next big scope on the CPU, still answering.
  fail = true;
  for (int i = 0; i < 10; ++i) store.insert(make("cpu", "cpu question " + std::string(1, char('a' + i)), "cpu"), {});
  EXPECT_EQ(store.gpu_scopes(), 1u);
  const auto c = words.one("cpu question c");
  const auto cm = store.best("cpu", c.data(), now_unix_ms());
  ASSERT_TRUE(cm.has_value());
  EXPECT_EQ(cm->entry.text, "cpu question c");
}

TEST(EntryStore, NormalizePromptCollapsesWhitespaceOnly) {
  EXPECT_EQ(normalize_prompt("  What is\t the\n\ncapital?  "), "What is the capital?");
  EXPECT_EQ(normalize_prompt("Apple"), "Apple");  // case kept
  EXPECT_EQ(normalize_prompt(" \t\n"), "");
  EXPECT_NE(normalize_prompt("capital?"), normalize_prompt("capital ?"));  // punctuation kept
}

TEST(EntryStore, ExactTierAndCandidates) {
  EntryStore store(32, IndexConfig{}, 10000, 1ull << 30);
  store.insert(make("s", "what is the capital of france", "Paris"), {});
  store.insert(make("s", "what is the capital city of france", "Paris too"), {});
  store.insert(make("s", "tell me a joke about cats", "No"), {});
  store.insert(make("other", "what  is the capital of france", "Other scope"), {});
  const auto now = now_unix_ms();
  auto m = store.exact("s", " what is the capital of  france ", now);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->entry.answer.content, "Paris");
  EXPECT_FALSE(store.exact("s", "What is the capital of France", now));  // case differs
  EXPECT_FALSE(store.exact("none", "what is the capital of france", now));
  EXPECT_EQ(store.exact("other", "what is the capital of france", now)->entry.answer.content, "Other scope");
  // Candidates: best first, above the floor, only the scope's own.
  const auto q = words.one("what is the capital of france");
  auto c = store.candidates("s", q.data(), 4, 0.5f, now);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].entry.answer.content, "Paris");
  EXPECT_EQ(c[1].entry.answer.content, "Paris too");
  EXPECT_GE(c[0].similarity, c[1].similarity);
  EXPECT_EQ(store.candidates("s", q.data(), 1, 0.5f, now).size(), 1u);
  // Erasing the entry frees its exact key; expired entries are not served.
  std::uint64_t id = m->entry.id;
  store.erase(id, {});
  EXPECT_FALSE(store.exact("s", "what is the capital of france", now));
  store.insert(make("s", "short lived", "x", 0.001), {});
  EXPECT_FALSE(store.exact("s", "short lived", now + 10));
}
