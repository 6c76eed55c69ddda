#pragma once
// Cacheability and scope: pure functions of the config and the request, no state, no clock.
// Everything that must match exactly for a hit to be correct is folded into CachePlan::scope_key;
// only the text that may vary by paraphrase goes into CachePlan::text. README.md lists the rules.
#include <string_view>

#include "tidegate/cache/cache_config.h"
#include "tidegate/cache/semantic_cache.h"

namespace tidegate::cache {

CachePlan make_plan(const CacheConfig& config, const RequestView& request);

// Header helpers, exposed for tests and for the gateway's logs.
bool cache_control_has(std::string_view header, std::string_view directive);

// True unless the two texts visibly ask about different things: the numbers they contain differ
// (as multisets), a capitalised word (a name, not the first word) of one is absent from the
// other, or the content words they share come in a different order ("import from Canada to
// India" vs "from India to Canada"). Applied to every candidate hit when `lexical_guard` is on
// (default).
bool lexical_guard(std::string_view a, std::string_view b);

// Only the checks `checks` names (GuardChecks, cache_config.h).
bool lexical_guard(std::string_view a, std::string_view b, const GuardChecks& checks);

bool is_valid_utf8(std::string_view s);
// Sorted-key JSON, so two bodies that differ only in key order hash the same.
std::string canonical_json(const boost::json::value& v);
std::string sha256_hex(std::string_view data);

}  // namespace tidegate::cache
