#pragma once
// One JSON object per line on stderr (or a file): greppable, and parseable by log shippers.
// Thread-safe; a line is written with one write() so lines from threads never interleave.
#include <boost/json.hpp>

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

}  // namespace tidegate::log
