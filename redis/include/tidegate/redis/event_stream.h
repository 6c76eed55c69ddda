#pragma once
// One Redis stream that every gateway of a fleet appends to and reads (issue 22): the semantic
// cache's inserts and erasures (cache/shared_cache.h), the routers' placements of prompt prefixes
// and sessions (gateway/app/shared_routing.h).
//
// Each gateway tags its events with its own id and a running number. A reader skips its own
// events; a gap in another gateway's numbers (events trimmed before this reader got to them, or
// written while it was away) is counted and logged once per gap, and the reader carries on: what
// flows through these streams are hints whose loss costs a later miss, never a wrong answer.
// Nothing waits on Redis: a publication while Redis is down fails at once (counted), and the
// reader retries every quarter second until Redis answers again.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tidegate/redis/client.h"

namespace prometheus {
class Counter;
class Registry;
}

namespace tidegate::redis {

// The stream's counters, owned by its user's metric family (any may be null).
struct StreamCounters {
  prometheus::Counter* published = nullptr;       // appended by this gateway
  prometheus::Counter* publish_failed = nullptr;  // Redis down or slow: this event stays local
  prometheus::Counter* applied = nullptr;         // another gateway's event handed to on_event
  prometheus::Counter* missed = nullptr;          // another gateway's events trimmed before read
};

// Registers the family `name`{event} with the four events above, plus each `extra` event (its
// counter written through the pointer). A null registry leaves every counter null.
StreamCounters register_stream_counters(prometheus::Registry* registry, const std::string& name, const std::string& help,
                                        std::initializer_list<std::pair<const char*, prometheus::Counter**>> extra = {});

class EventStream final : public std::enable_shared_from_this<EventStream> {
 public:
  using Fields = std::map<std::string, std::string>;
  // Another gateway's event, on the reader's strand. True when it was applied (counted).
  using OnEvent = std::function<bool(const Fields&)>;

  struct Options {
    std::string key;            // the stream's Redis key, e.g. "tidegate:cache"
    std::size_t max_len = 10000;  // XADD MAXLEN ~ this
    std::string log_name;       // log events are "<log_name>.shared_stream_start", "..._behind"
  };

  // `publisher` and `reader` must be two connections: the reader's XREAD BLOCK holds its own.
  // Reading starts at once, from events added after this call.
  static std::shared_ptr<EventStream> start(std::shared_ptr<Client> publisher, std::shared_ptr<Client> reader,
                                            Options options, StreamCounters counters, OnEvent on_event);

  // Thread-safe; never waits. `fields` are name, value pairs ("origin" and "seq" are the stream's).
  void publish(std::vector<std::string> fields);
  // Ends the XREAD in flight and stops reading and publishing. Idempotent.
  void stop();
  const std::string& gateway_id() const { return id_; }

  // Public for make_shared; use start().
  EventStream(std::shared_ptr<Client> publisher, std::shared_ptr<Client> reader, Options options,
              StreamCounters counters, OnEvent on_event);

 private:
  void read_next();
  void on_read(const Result& r);
  void apply(const Reply& entry);
  void note_sequence(const std::string& origin, std::uint64_t seq);

  std::shared_ptr<Client> publisher_;
  std::shared_ptr<Client> reader_;
  Options options_;
  StreamCounters counters_;
  OnEvent on_event_;
  std::string id_;
  std::atomic<std::uint64_t> seq_{0};
  std::atomic<bool> stopped_{false};
  // The reader's strand only:
  std::string last_id_ = "$";  // only what is added from now on; then the last id read
  std::map<std::string, std::uint64_t> last_seq_;
};

}  // namespace tidegate::redis
