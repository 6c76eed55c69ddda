#pragma once
// The semantic cache shared by several gateways (issue 22). Each gateway keeps answering from its
// own local index; what changes it (inserts, and erasures by tenant/model, admin invalidation
// included) is also appended to one Redis stream, trimmed to about max_len entries, which every
// gateway reads on its own connection (XREAD BLOCK) and applies to its index. An insert on one
// gateway is therefore a hit on the others once they embedded it (well under a second).
//
// Each gateway numbers its events; a reader that finds a gap in a gateway's numbers (it fell
// behind the trim, or was away) logs and counts what it missed and carries on: the cache is an
// optimisation, a missed insert is a later miss. Erasing one entry by id (DELETE
// /admin/cache/entries/ID) stays local: ids are each gateway's own. While Redis is down the
// cache is local only (publications fail fast, counted).
#include <cstddef>
#include <memory>

#include "tidegate/cache/semantic_cache.h"

namespace tidegate::redis {
class Client;
struct RedisConfig;
}  // namespace tidegate::redis

namespace tidegate::cache {

// `publisher` and `reader` must be two connections (the reader's XREAD BLOCK holds its own).
std::shared_ptr<SemanticCache> make_shared_cache(std::shared_ptr<SemanticCache> local,
                                                 std::shared_ptr<redis::Client> publisher,
                                                 std::shared_ptr<redis::Client> reader,
                                                 std::shared_ptr<const redis::RedisConfig> config,
                                                 prometheus::Registry* registry);

}  // namespace tidegate::cache
