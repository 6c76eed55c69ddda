#include "tidegate/common/log.h"

#include "tidegate/common/json_text.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace tidegate::log {
namespace {

std::atomic<int> g_min_level{static_cast<int>(Level::kInfo)};
std::atomic<int> g_fd{STDERR_FILENO};

std::string_view level_name(Level l) {
  switch (l) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "info";
}

}  // namespace

void set_min_level(Level level) { g_min_level = static_cast<int>(level); }

void set_output_file(const std::string& path) {
  if (path.empty()) {
    g_fd = STDERR_FILENO;
    return;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) g_fd = fd;
}

std::string iso8601_now() {
  const auto now = std::chrono::system_clock::now();
  const auto secs = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[80];  // room for any int the fields could hold, so the format is never cut
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

void write_line(int fd, std::string_view json_line) {
  std::string line(json_line);
  line.push_back('\n');
  // One write per line: O_APPEND writes below PIPE_BUF are atomic, so threads never interleave.
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const auto n = ::write(fd, p, left);
    if (n <= 0) return;  // logging must never take the process down
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void write(Level level, std::string_view event, boost::json::object fields) {
  if (static_cast<int>(level) < g_min_level.load(std::memory_order_relaxed)) return;
  boost::json::object line;
  line["ts"] = iso8601_now();
  line["level"] = level_name(level);
  line["event"] = event;
  for (auto& kv : fields) line[kv.key()] = std::move(kv.value());
  write_line(g_fd.load(std::memory_order_relaxed), common::to_json_text(line));  // plain decimals, no 0E0
}

}  // namespace tidegate::log
