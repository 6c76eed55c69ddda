#include <gtest/gtest.h>

#include "balancer.h"

using namespace tidegate::gateway;

TEST(Balancer, RoundRobinCycles) {
  Balancer b(1);
  std::vector<Candidate> c(3);
  std::vector<int> picks;
  for (int i = 0; i < 6; ++i) picks.push_back(b.pick(BalancerKind::kRoundRobin, c));
  EXPECT_EQ(picks, (std::vector<int>{0, 1, 2, 0, 1, 2}));
}

TEST(Balancer, P2CAvoidsTheBusiestReplica) {
  Balancer b(7);
  std::vector<Candidate> c{{10, 1}, {0, 1}, {0, 1}};
  for (int i = 0; i < 200; ++i) EXPECT_NE(b.pick(BalancerKind::kLeastOutstandingP2C, c), 0);
}

TEST(Balancer, P2CSpreadsEqualLoad) {
  Balancer b(9);
  std::vector<Candidate> c(4);
  std::vector<int> counts(4);
  for (int i = 0; i < 4000; ++i) counts[static_cast<std::size_t>(b.pick(BalancerKind::kLeastOutstandingP2C, c))]++;
  for (int n : counts) EXPECT_GT(n, 700);
}

TEST(Balancer, WeightedFollowsWeights) {
  Balancer b(11);
  std::vector<Candidate> c{{0, 1}, {0, 3}, {0, 0}};
  std::vector<int> counts(3);
  for (int i = 0; i < 8000; ++i) counts[static_cast<std::size_t>(b.pick(BalancerKind::kWeighted, c))]++;
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(counts[1] / 8000.0, 0.75, 0.03);
}

TEST(Balancer, EmptyAndSingle) {
  Balancer b(1);
  EXPECT_EQ(b.pick(BalancerKind::kWeighted, {}), -1);
  EXPECT_EQ(b.pick(BalancerKind::kLeastOutstandingP2C, {Candidate{}}), 0);
}
