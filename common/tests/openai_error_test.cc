#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "tidegate/common/openai_error.h"

namespace tidegate::common {
namespace {

TEST(OpenAIError, HasTheFourFieldsWithNullsForEmptyOnes) {
  const auto v = boost::json::parse(openai_error_body("bad \"x\"\n", "invalid_request_error", "invalid_value"));
  const auto& e = v.at("error").as_object();
  EXPECT_EQ(e.size(), 4u);
  EXPECT_EQ(e.at("message").as_string(), "bad \"x\"\n");  // escaped, and read back whole
  EXPECT_EQ(e.at("type").as_string(), "invalid_request_error");
  EXPECT_EQ(e.at("code").as_string(), "invalid_value");
  EXPECT_TRUE(e.at("param").is_null());
  const auto w = boost::json::parse(openai_error_body("m", "server_error", "", "messages"));
  EXPECT_TRUE(w.at("error").at("code").is_null());
  EXPECT_EQ(w.at("error").at("param").as_string(), "messages");
}

}  // namespace
}  // namespace tidegate::common
