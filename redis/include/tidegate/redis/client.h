#pragma once
// An asynchronous Redis client on an Asio executor (hiredis underneath). Nothing waits on it:
// every command completes exactly once, with a reply, a timeout after command_timeout, or at once
// with kUnavailable while Redis is down, so callers fall back to local state without blocking.
// It reconnects by itself with exponential backoff and reports its health.
#include <boost/asio/any_io_executor.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tidegate/redis/config.h"

namespace prometheus {
class Registry;
}

namespace tidegate::redis {

struct Reply {
  enum class Type { kNil, kInteger, kString, kStatus, kArray, kError };
  Type type = Type::kNil;
  long long integer = 0;
  std::string str;  // kString, kStatus, kError
  std::vector<Reply> elements;

  bool is_error() const { return type == Type::kError; }
  // Integer or numeric string as a double (INCRBYFLOAT answers a string); `fallback` otherwise.
  double number(double fallback = 0) const;
};

struct Result {
  enum class Outcome { kReply, kTimeout, kUnavailable };
  Outcome outcome = Outcome::kUnavailable;
  Reply reply;         // valid when outcome == kReply (it may be a Redis error reply)
  std::string error;   // why, when there is no usable reply
  bool ok() const { return outcome == Outcome::kReply && !reply.is_error(); }
};

enum class Health { kConnecting, kUp, kDown };
const char* to_string(Health h);

class Client {
 public:
  using Callback = std::function<void(Result)>;
  virtual ~Client() = default;

  // Thread-safe. `done` runs exactly once, on the client's executor, never inside this call.
  // timeout_s < 0: the configured command_timeout (XREAD BLOCK passes a longer one).
  virtual void command(std::vector<std::string> args, Callback done, double timeout_s = -1) = 0;
  virtual Health health() const = 0;
  // Where callbacks run (a strand): timers of the client's users go here to be serialised with them.
  virtual boost::asio::any_io_executor executor() const = 0;
  // Called on the client's executor at each health transition (set before start()).
  virtual void on_health(std::function<void(Health)> listener) = 0;
  // Connects (asynchronously). Commands before the connection completes wait in its buffer,
  // still bounded by their timeout.
  virtual void start() = 0;
  // Closes the connection and stops reconnecting; pending commands complete with kUnavailable.
  // Asynchronous and idempotent; the destructor of the last handle calls it.
  virtual void stop() = 0;
};

// `connection` names this connection in logs and metric labels ("main", "stream").
// `registry` may be null (no metrics); it must outlive the executor's last handler (the Loop).
std::shared_ptr<Client> make_client(std::shared_ptr<const RedisConfig> config, boost::asio::any_io_executor executor,
                                    prometheus::Registry* registry, const std::string& connection = "main");

}  // namespace tidegate::redis
