#pragma once
// One JSON object per line on stderr (or a file): greppable, and parseable by log shippers.
// Thread-safe; a line is written with one write() so lines from threads never interleave.
#include <boost/json.hpp>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace tidegate::log {

enum class Level { kDebug, kInfo, kWarn, kError };

void set_min_level(Level level);
// Redirects log output to a file (appending); empty path means stderr.
void set_output_file(const std::string& path);

// Writes {"ts": ISO-8601 UTC, "level": ..., "event": event, ...fields}.
void write(Level level, std::string_view event, boost::json::object fields = {});

inline void info(std::string_view event, boost::json::object fields = {}) { write(Level::kInfo, event, std::move(fields)); }
inline void warn(std::string_view event, boost::json::object fields = {}) { write(Level::kWarn, event, std::move(fields)); }
inline void error(std::string_view event, boost::json::object fields = {}) { write(Level::kError, event, std::move(fields)); }
inline void debug(std::string_view event, boost::json::object fields = {}) { write(Level::kDebug, event, std::move(fields)); }

// Appends one already-serialised JSON line to an arbitrary file descriptor (access logs).
void write_line(int fd, std::string_view json_line);

std::string iso8601_now();

// For a line that can repeat fast (a peer sending bad data every few milliseconds): at most one
// line per interval, and that line says how many occurrences were left out since the last one.
// Counting every occurrence is the metrics' job; this keeps the log readable. Thread-safe.
class Throttle final {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Throttle(Clock::duration interval) : interval_(interval) {}
  // True when this occurrence is to be logged; `suppressed` is then the number left out before it.
  bool admit(std::uint64_t& suppressed, Clock::time_point now = Clock::now()) {
    std::lock_guard lock(mu_);
    if (logged_once_ && now < next_) {
      ++dropped_;
      return false;
    }
    logged_once_ = true;
    next_ = now + interval_;
    suppressed = dropped_;
    dropped_ = 0;
    return true;
  }

 private:
  const Clock::duration interval_;
  std::mutex mu_;
  bool logged_once_ = false;
  Clock::time_point next_{};
  std::uint64_t dropped_ = 0;
};

}  // namespace tidegate::log
