#include "tidegate/sim/text.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tidegate::sim {
namespace {

std::string concat(const std::vector<std::string_view>& v) {
  std::string s;
  for (auto p : v) s += p;
  return s;
}

TEST(Text, PiecesRoundTripExactly) {
  for (std::string_view t : {"hello world", "  lead and trail  ", "a", "", "tabs\tand\nnewlines\n",
                             "héllo wörld ünïcode", "supercalifragilistic"}) {
    EXPECT_EQ(concat(split_pieces(t)), t) << t;
  }
}

TEST(Text, CountsWordsAndFourCharPieces) {
  EXPECT_EQ(count_tokens("hello world"), 4);  // "hell" "o" " wor" "ld"
  EXPECT_EQ(count_tokens("a b c"), 3);
  EXPECT_EQ(count_tokens(""), 0);
  EXPECT_EQ(count_tokens("   "), 1);
  EXPECT_EQ(count_tokens("héllo"), 2);  // 4 characters, not 4 bytes, per piece
}

TEST(Text, GeneratedTokensDeterministic) {
  EXPECT_EQ(generated_token(42, 3), generated_token(42, 3));
  int differ = 0;
  for (int i = 0; i < 20; ++i) differ += generated_token(1, i) != generated_token(2, i);
  EXPECT_GT(differ, 10);
}

TEST(Text, EmbeddingsUnitLengthAndDeterministic) {
  auto a = embed_text("x", 1, 384), b = embed_text("x", 1, 384), c = embed_text("y", 1, 384);
  ASSERT_EQ(a.size(), 384u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double n = 0;
  for (float x : a) n += x * x;
  EXPECT_NEAR(std::sqrt(n), 1.0, 1e-5);
}

}  // namespace
}  // namespace tidegate::sim
