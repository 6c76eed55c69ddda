// Follow-up questions ("What famous landmark can you find in Paris?") must only ever hit within
// the conversation they were asked in. Uses the MeanCache contextual-queries set.
#include <fstream>

#include "cache_fixture.h"

using namespace tidegate::cache;
using namespace tidegate::cache::fakes;
namespace json = boost::json;

namespace {

struct Conversation {
  std::string main, main_answer, follow_up, follow_answer;
};

std::vector<Conversation> load_conversations() {
  const std::string path = std::string(TIDEGATE_SOURCE_ROOT) + "/../shared/data/paraphrase/multiturn.json";
  std::ifstream in(path);
  if (!in) return {};
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  std::vector<Conversation> out;
  const auto doc = json::parse(text);
  for (const auto& v : doc.as_array()) {
    const auto& o = v.as_object();
    out.push_back({o.at("Main Query").as_string().c_str(), o.at("Main Query Response").as_string().c_str(),
                   o.at("Follow-Up Query").as_string().c_str(), o.at("Follow Up Query Response").as_string().c_str()});
  }
  return out;
}

json::object follow_up_body(const Conversation& context, const std::string& follow_up) {
  return json::object{{"model", "m"},
                      {"messages", json::array{json::object{{"role", "user"}, {"content", context.main}},
                                               json::object{{"role", "assistant"}, {"content", context.main_answer}},
                                               json::object{{"role", "user"}, {"content", follow_up}}}}};
}

}  // namespace

TEST(CacheMultiTurn, FollowUpsNeverHitAcrossConversations) {
  const auto convs = load_conversations();
  if (convs.empty()) GTEST_SKIP() << "../shared/data/paraphrase/multiturn.json not found";
  CacheConfig cfg;
  cfg.threshold = 0.5;  // deliberately loose: isolation must come from the scope, not the threshold
  cfg.lookup_timeout_s = 5;
  CacheHarness h(cfg);
  for (const auto& c : convs) h.insert_and_wait(h.plan(follow_up_body(c, c.follow_up)), c.follow_answer);
  ASSERT_EQ(h.cache->stats().at("entries").as_uint64(), convs.size());

  int cross_hits = 0, own_hits = 0, checked = 0;
  for (std::size_t i = 0; i < convs.size(); ++i) {
    // Own conversation: hit with its own answer.
    const auto own = h.lookup(h.plan(follow_up_body(convs[i], convs[i].follow_up)));
    own_hits += own.status == CacheStatus::kHit && own.answer.content == convs[i].follow_answer;
    // The same follow-up text in a few other conversations: never an answer from conversation i
    // (a hit on the other conversation's own follow-up, a paraphrase in its context, is fine).
    for (std::size_t d = 1; d <= 3; ++d) {
      const auto& other = convs[(i + d * 17) % convs.size()];
      if (other.main == convs[i].main) continue;
      const auto r = h.lookup(h.plan(follow_up_body(other, convs[i].follow_up)));
      cross_hits += r.status == CacheStatus::kHit && r.answer.content != other.follow_answer;
      ++checked;
    }
    // And as a first message without any context: never a hit either.
    json::object alone{{"model", "m"},
                       {"messages", json::array{json::object{{"role", "user"}, {"content", convs[i].follow_up}}}}};
    cross_hits += h.lookup(h.plan(alone)).status == CacheStatus::kHit;
  }
  EXPECT_EQ(cross_hits, 0);
  EXPECT_EQ(own_hits, static_cast<int>(convs.size()));
  EXPECT_GT(checked, 300);
}
