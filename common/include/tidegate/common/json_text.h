#pragma once
// JSON text with plain decimal numbers. boost::json writes every double in exponent form
// (268.0 as 2.68E2, 945.2227 as 9.452227E2), which people, jq filters, log search and
// spreadsheets read badly; the cost report, the admin API, logs and the gateway write through these.
#include <boost/json.hpp>

#include <string>

namespace tidegate::common {

// `v` with no exponent. When the shortest text that reads back as `v` needs at most
// `max_decimals` decimals it is that text (so 1733078400.125 keeps every digit and 268.0 is
// "268"); otherwise `v` rounded to `max_decimals` places, trailing zeros trimmed
// (0.30000000000000004 is "0.3" at 9). Non-finite values, which JSON cannot carry, are "null".
std::string format_decimal(double v, int max_decimals = 9);

// boost::json::serialize, except that doubles go through format_decimal(v, max_decimals).
// Nine places keep dollar figures to a nano-dollar, well below anything anyone is billed.
std::string to_json_text(const boost::json::value& v, int max_decimals = 9);
void append_json_text(std::string& out, const boost::json::value& v, int max_decimals = 9);

}  // namespace tidegate::common
