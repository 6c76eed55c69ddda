// log::Throttle: the first occurrence is logged, later ones at most once per interval, and
// each logged line carries how many were left out since the one before.
#include <gtest/gtest.h>

#include "tidegate/common/log.h"

namespace tidegate::log {
namespace {

TEST(LogThrottle, OneLinePerIntervalCountingWhatItLeftOut) {
  using namespace std::chrono_literals;
  Throttle t(60s);
  const auto t0 = Throttle::Clock::time_point{} + 1000s;
  std::uint64_t suppressed = 99;
  ASSERT_TRUE(t.admit(suppressed, t0));
  EXPECT_EQ(suppressed, 0u);
  for (int i = 1; i <= 200; ++i) EXPECT_FALSE(t.admit(suppressed, t0 + i * 5ms));  // a peer every 5 ms
  EXPECT_FALSE(t.admit(suppressed, t0 + 59s));
  ASSERT_TRUE(t.admit(suppressed, t0 + 60s));
  EXPECT_EQ(suppressed, 201u);
  ASSERT_TRUE(t.admit(suppressed, t0 + 200s));  // quiet in between: logged at once, nothing left out
  EXPECT_EQ(suppressed, 0u);
}

}  // namespace
}  // namespace tidegate::log
