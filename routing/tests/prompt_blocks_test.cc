// Prompt blocks: equal byte prefixes give equal leading hashes and nothing else does; whole
// blocks only; bounded; and the gateway's use, a chat conversation growing turn by turn.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "tidegate/routing/prefix_aware.h"
#include "tidegate/routing/prompt_blocks.h"

namespace tidegate::routing {
namespace {

TEST(PromptBlocks, SharedPrefixesShareExactlyTheirWholeBlocks) {
  const PromptBlocksConfig cfg{16, 1 << 20};
  std::string a(200, 'x'), b = a;
  b[100] = 'y';  // differs in block 6 (bytes 96..111)
  std::vector<std::uint64_t> ha, hb;
  EXPECT_EQ(prompt_blocks(a, cfg, ha), 12u);  // 200 / 16, the partial tail not hashed
  prompt_blocks(b, cfg, hb);
  ASSERT_EQ(hb.size(), 12u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(ha[i], hb[i]) << i;
  for (int i = 6; i < 12; ++i) EXPECT_NE(ha[i], hb[i]) << i;  // chained: a difference carries on
  // The same block content at another position is another hash (the chain differs).
  std::set<std::uint64_t> distinct(ha.begin(), ha.end());
  EXPECT_EQ(distinct.size(), ha.size());
  std::vector<std::uint64_t> none;
  EXPECT_EQ(prompt_blocks("short", cfg, none), 0u);
  EXPECT_EQ(prompt_blocks(a, PromptBlocksConfig{0, 100}, none), 0u);
}

TEST(PromptBlocks, HugePromptsAreHashedOnlyUpToTheBound) {
  const std::string huge(10 << 20, 'z');
  std::vector<std::uint64_t> h;
  EXPECT_EQ(prompt_blocks(huge, PromptBlocksConfig{128, 1 << 20}, h), (1u << 20) / 128);
  EXPECT_EQ(prompt_blocks(huge, PromptBlocksConfig{100, 1000}, h), 10u);
}

TEST(PromptBlocks, EveryByteAndLengthChangesTheHash) {
  std::mt19937_64 rng(3);
  std::set<std::uint64_t> seen;
  std::string s(97, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  for (std::size_t len = 0; len <= s.size(); ++len) EXPECT_TRUE(seen.insert(hash_bytes({s.data(), len})).second) << len;
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto t = s;
    t[i] ^= 1;
    EXPECT_TRUE(seen.insert(hash_bytes(t)).second) << i;
  }
}

TEST(PromptBlocks, TheVectorPathComputesTheReferenceHashes) {
  // Differential: every block size (stripe-aligned or not), lengths around stripe and block
  // edges, random bytes; the fast path (AVX2 where the CPU has it) against the portable one.
  std::mt19937_64 rng(11);
  std::string s(5000, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  std::vector<std::uint64_t> fast, reference;
  for (const std::size_t block : {1u, 7u, 63u, 64u, 65u, 128u, 500u, 512u})
    for (const std::size_t len : {0u, 1u, 63u, 64u, 65u, 511u, 512u, 513u, 4999u, 5000u}) {
      const std::string_view prompt(s.data(), len);
      EXPECT_EQ(prompt_blocks(prompt, {block, 1 << 20}, fast), detail::prompt_blocks_portable(prompt, {block, 1 << 20}, reference));
      EXPECT_EQ(fast, reference) << "block " << block << " len " << len;
    }
}

TEST(PromptBlocks, SwappedStripesAreAnotherPrompt) {
  // Each stripe's key differs, so moving 64-byte pieces around changes the hash.
  std::string a(256, 'a');
  for (int i = 0; i < 64; ++i) a[64 + i] = 'b';
  std::string b = a.substr(64, 64) + a.substr(0, 64) + a.substr(128);
  EXPECT_NE(hash_bytes(a), hash_bytes(b));
}

TEST(PromptBlocks, AConversationsNextTurnMatchesWhatItsLastTurnLeft) {
  // The raw `messages` array of turn k is turn k-1's array without its closing bracket, a
  // comma, and the new messages: the index of the replica that served turn k-1 matches all of
  // turn k-1's whole blocks but the one holding the bracket.
  const PromptBlocksConfig cfg{128, 1 << 20};
  std::string messages = R"([{"role":"system","content":"You are a careful assistant for a shipping company."}])";
  PrefixIndex index(10000);
  std::vector<std::uint64_t> prev, now;
  for (int turn = 0; turn < 6; ++turn) {
    messages.pop_back();
    messages += R"(,{"role":"user","content":"Question )" + std::to_string(turn) + std::string(300, 'q') +
                R"("},{"role":"assistant","content":")" + std::string(400, 'a') + R"("}])";
    prompt_blocks(messages, cfg, now);
    if (turn > 0) {
      const auto m = index.match(now);
      EXPECT_GE(m + 1, prev.size()) << turn;
      EXPECT_LE(m, prev.size()) << turn;
    }
    index.insert(now);
    prev = now;
  }
}

}  // namespace
}  // namespace tidegate::routing
