#include "tidegate/encoder/hash_embedder.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tidegate::encoder {
namespace {

const auto kDeadline = std::chrono::steady_clock::time_point::max();

double dot(const std::vector<float>& v, std::size_t a, std::size_t b, std::size_t dim) {
  double s = 0;
  for (std::size_t i = 0; i < dim; ++i) s += static_cast<double>(v[a * dim + i]) * v[b * dim + i];
  return s;
}

TEST(HashEmbedder, DeterministicAcrossInstancesAndUnitLength) {
  auto a = make_hash_embedder();
  auto b = make_hash_embedder();
  EXPECT_EQ(a->dim(), 384u);
  EXPECT_EQ(a->name(), "hash");
  const std::vector<std::string> texts = {"Hello world", "", "!!!", "Ünïcode 中文 text", std::string("\xff\xfe", 2)};
  const auto va = a->embed(texts, kDeadline);
  EXPECT_EQ(va, b->embed(texts, kDeadline));
  for (std::size_t r = 0; r < texts.size(); ++r) EXPECT_NEAR(dot(va, r, r, 384), 1.0, 1e-5) << r;
}

TEST(HashEmbedder, CaseAndPunctuationDoNotMatterButWordsDo) {
  auto e = make_hash_embedder();
  const auto v = e->embed({"What is the capital of France?", "what is the capital of france", "What's France's capital city?",
                           "How do I bake sourdough bread at home?"},
                          kDeadline);
  EXPECT_NEAR(dot(v, 0, 1, 384), 1.0, 1e-5);
  EXPECT_GT(dot(v, 0, 2, 384), dot(v, 0, 3, 384) + 0.2);
}

TEST(HashEmbedder, SeedAndDimensionChangeTheSpace) {
  HashEmbedderOptions small;
  small.dim = 64;
  EXPECT_EQ(make_hash_embedder(small)->embed({"abc"}, kDeadline).size(), 64u);
  HashEmbedderOptions seeded;
  seeded.seed = 7;
  EXPECT_NE(make_hash_embedder(seeded)->embed({"abc def"}, kDeadline), make_hash_embedder()->embed({"abc def"}, kDeadline));
  HashEmbedderOptions bad;
  bad.dim = 0;
  EXPECT_THROW(make_hash_embedder(bad), std::invalid_argument);
  bad.dim = 8;
  bad.min_n = 4;
  bad.max_n = 3;
  EXPECT_THROW(make_hash_embedder(bad), std::invalid_argument);
}

}  // namespace
}  // namespace tidegate::encoder
