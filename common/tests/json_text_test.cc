// Plain-decimal JSON text: no exponent anywhere, integers stay integers, values read back.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <cmath>
#include <limits>
#include <regex>

#include "tidegate/common/json_text.h"

namespace tidegate::common {
namespace {

TEST(FormatDecimal, NoExponentAndShortestWhenItFits) {
  EXPECT_EQ(format_decimal(268.0), "268");
  EXPECT_EQ(format_decimal(945.222714), "945.222714");
  EXPECT_EQ(format_decimal(0.30000000000000004), "0.3");  // past 9 places: rounded, zeros trimmed
  EXPECT_EQ(format_decimal(0.000012345), "0.000012345");
  EXPECT_EQ(format_decimal(1.5e-12), "0");               // below a nano-dollar
  EXPECT_EQ(format_decimal(-1.5e-12), "0");              // never "-0"
  EXPECT_EQ(format_decimal(-0.0), "0");
  EXPECT_EQ(format_decimal(-2.5), "-2.5");
  EXPECT_EQ(format_decimal(1733078400.125), "1733078400.125");  // Unix seconds keep their digits
  EXPECT_EQ(format_decimal(1e21), "1000000000000000000000");
  EXPECT_EQ(format_decimal(945.222714, 3), "945.223");
  EXPECT_EQ(format_decimal(12.0, 3), "12");
  EXPECT_EQ(format_decimal(std::nan(""), 3), "null");
  EXPECT_EQ(format_decimal(std::numeric_limits<double>::infinity()), "null");
  // Extremes fit the buffer and still carry no exponent.
  EXPECT_EQ(format_decimal(std::numeric_limits<double>::max()).find_first_of("eE"), std::string::npos);
  EXPECT_EQ(format_decimal(std::numeric_limits<double>::denorm_min(), 60), "0");
}

TEST(JsonText, DoublesPlainEverythingElseAsBoostWritesIt) {
  const boost::json::value v = {{"requests", 268.0},
                                {"duration_ms", 945.222714},
                                {"tokens", std::int64_t{12345678901}},
                                {"name", "a \"quoted\"\nname"},
                                {"list", boost::json::array{1.5e-5, nullptr, true, false, -3}},
                                {"nested", {{"x", 2.5e6}}}};
  const auto text = to_json_text(v);
  EXPECT_EQ(text,
            "{\"requests\":268,\"duration_ms\":945.222714,\"tokens\":12345678901,"
            "\"name\":\"a \\\"quoted\\\"\\nname\",\"list\":[0.000015,null,true,false,-3],\"nested\":{\"x\":2500000}}");
  const auto back = boost::json::parse(text);
  EXPECT_TRUE(back.at("requests").is_int64());  // a whole number reads back as a JSON integer
  EXPECT_DOUBLE_EQ(back.at("duration_ms").as_double(), 945.222714);
  EXPECT_EQ(back.at("name").as_string(), "a \"quoted\"\nname");
  EXPECT_EQ(boost::json::serialize(boost::json::value(268.0)), "2.68E2");  // why this file exists
}

}  // namespace
}  // namespace tidegate::common
