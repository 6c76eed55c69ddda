#pragma once
// The cache's data directory: `snapshot` (all entries with their vectors, so a restart needs no
// re-embedding) plus append-only `log.<generation>` files. Every record carries a CRC32; a torn
// or corrupt record ends the reading of that file, is reported, and the rest still loads.
// Snapshots are written to a temp file, fsynced and renamed, so a crash leaves either the old
// or the new one. A snapshot first rotates the log, then captures the entries: any insert or
// erase is then in the snapshot, in a log the snapshot does not cover, or both (replay is
// idempotent), never lost.
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "tidegate/cache/entry_store.h"

namespace tidegate::cache {

std::uint32_t crc32(const void* data, std::size_t n);

// Replaces the file at `path` with `text`: written to path.tmp, fsynced, renamed, the folder
// fsynced, so a crash leaves the old file or the new one. False (and *error) on failure.
bool write_file_durably(const std::string& path, const std::string& text, std::string* error);

class Persistence final {
 public:
  explicit Persistence(std::string dir);
  ~Persistence();
  Persistence(const Persistence&) = delete;
  Persistence& operator=(const Persistence&) = delete;

  struct Loaded {
    std::vector<Entry> entries;
    std::vector<std::string> problems;  // one line per corrupt file or torn tail
  };
  // Reads everything, then opens a fresh log generation for appends. Never throws on bad
  // files; throws only when the directory itself cannot be created.
  Loaded load(std::size_t dim);

  // Each returns false (and counts a write error) when the disk refuses the write; a failed
  // append is truncated away so later records stay readable.
  bool append_insert(const Entry& e);
  bool append_erase(std::uint64_t id);
  bool sync();
  bool snapshot(const std::function<std::vector<Entry>()>& capture);

  std::uint64_t log_bytes() const { return log_bytes_.load(); }
  std::uint64_t write_errors() const { return write_errors_.load(); }
  const std::string& dir() const { return dir_; }

 private:
  bool append_record(const std::string& payload);
  bool open_log_locked(std::uint64_t gen);
  void write_failed(const char* op, int err);

  const std::string dir_;
  std::size_t dim_ = 0;
  std::mutex mu_;  // guards the log fd and generation
  int log_fd_ = -1;
  std::uint64_t log_gen_ = 0;
  bool dirty_ = false;
  std::atomic<std::uint64_t> log_bytes_{0};
  std::atomic<std::uint64_t> write_errors_{0};
};

}  // namespace tidegate::cache
