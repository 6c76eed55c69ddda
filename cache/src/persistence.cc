#include "tidegate/cache/persistence.h"

#include "persistence_records.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "tidegate/common/log.h"

namespace tidegate::cache {
namespace fs = std::filesystem;
// The record format (persistence_records.h); this file is about the files that hold them.
using namespace records;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool write_all(int fd, const std::string& s, int& err) {
  std::size_t off = 0;
  while (off < s.size()) {
    const auto n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      return false;
    }
    off += static_cast<std::size_t>(n);
  }
  return true;
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

bool write_file_durably(const std::string& path, const std::string& text, std::string* error) {
  const auto tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err = fd < 0 ? errno : 0;
  bool ok = fd >= 0 && write_all(fd, text, err);
  if (ok && ::fsync(fd) != 0) ok = false, err = errno;
  if (fd >= 0) ::close(fd);
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) ok = false, err = errno;
  if (!ok) {
    ::unlink(tmp.c_str());
    if (error) *error = tmp + ": " + std::strerror(err);
    return false;
  }
  fsync_dir(fs::path(path).parent_path().string());
  return true;
}

Persistence::Persistence(std::string dir) : dir_(std::move(dir)) { fs::create_directories(dir_); }

Persistence::~Persistence() {
  if (log_fd_ >= 0) {
    ::fdatasync(log_fd_);
    ::close(log_fd_);
  }
}

Persistence::Loaded Persistence::load(std::size_t dim) {
  Loaded out;
  dim_ = dim;
  std::map<std::uint64_t, Entry> live;
  std::uint64_t first_gen = 0;
  const auto snap = fs::path(dir_) / "snapshot";
  if (std::error_code ec; fs::exists(snap, ec) && !fs::is_regular_file(snap, ec)) {
    out.problems.push_back("snapshot: not a regular file; ignored");
  } else if (fs::exists(snap, ec)) {
    const auto data = read_file(snap);
    bool header = false, trailer = false;
    std::uint64_t count = 0, expected = 0;
    std::map<std::uint64_t, Entry> from_snap;
    std::string why = scan(data, [&](std::string_view payload) {
      if (trailer) throw std::runtime_error("data after trailer");
      Reader r(payload);
      const auto type = r.num<std::uint8_t>();
      if (!header) {
        if (type != kHeader || r.num<std::uint32_t>() != kVersion) throw std::runtime_error("bad snapshot header");
        const auto gen = r.num<std::uint64_t>();
        // The same bound as the logs': the writer never goes past it (open_log_locked), so
        // whatever this process writes, it reads back (a snapshot at 2^62 + 2 did not: the fuzzer).
        if (gen > kMaxGeneration) throw std::runtime_error("snapshot generation out of range");
        if (r.num<std::uint32_t>() != dim) throw std::runtime_error("snapshot vector dimension differs");
        // Only a header that holds decides which logs the snapshot covers: a refused one's
        // generation skipped every log below it (the fuzzer's K9), and the next snapshot then
        // deleted them, or, after a wrap, let them back in on the restart after.
        first_gen = gen;
        header = true;
      } else if (type == kInsert) {
        auto e = decode_insert(r, dim);
        from_snap[e.id] = std::move(e);
        ++count;
      } else if (type == kTrailer) {
        expected = r.num<std::uint64_t>();
        trailer = true;
      } else {
        throw std::runtime_error("unexpected record type in snapshot");
      }
    });
    if (why.empty() && (!header || !trailer || count != expected)) why = "snapshot incomplete (no header or trailer)";
    if (!why.empty()) {
      // Keep the intact records, and the damaged file for inspection; the next snapshot
      // replaces it.
      out.problems.push_back("snapshot: " + why + "; kept " + std::to_string(from_snap.size()) + " entries");
      std::error_code ec;
      fs::rename(snap, fs::path(dir_) / "snapshot.corrupt", ec);
    }
    live = std::move(from_snap);
  }
  std::vector<std::pair<std::uint64_t, fs::path>> logs;
  std::uint64_t max_gen = first_gen;
  for (const auto& de : fs::directory_iterator(dir_)) {
    const auto name = de.path().filename().string();
    if (name.rfind("log.", 0) != 0) continue;
    std::error_code ec;
    if (!fs::is_regular_file(de.path(), ec)) {
      // Not ours (a device, a FIFO, a directory): reading it could block or never end.
      out.problems.push_back(name + ": not a regular file; ignored");
      continue;
    }
    try {
      const std::uint64_t gen = std::stoull(name.substr(4));
      // Generations count snapshots; one near 2^64 is not ours, and max + 1 would wrap to 0
      // and let a log the snapshot had superseded be replayed (the fuzzer's K7).
      if (gen > kMaxGeneration) {
        out.problems.push_back(name + ": generation out of range; ignored");
        continue;
      }
      max_gen = std::max(max_gen, gen);
      if (gen >= first_gen) logs.emplace_back(gen, de.path());
    } catch (const std::exception&) {
    }
  }
  std::sort(logs.begin(), logs.end());
  for (const auto& [gen, path] : logs) {
    const auto data = read_file(path);
    const auto why = scan(data, [&](std::string_view payload) {
      Reader r(payload);
      const auto type = r.num<std::uint8_t>();
      if (type == kInsert) {
        auto e = decode_insert(r, dim);
        live[e.id] = std::move(e);
      } else if (type == kErase) {
        live.erase(r.num<std::uint64_t>());
      } else {
        throw std::runtime_error("unexpected record type in log");
      }
    });
    if (!why.empty()) out.problems.push_back(path.filename().string() + ": " + why + "; rest of file ignored");
  }
  for (auto& [id, e] : live) out.entries.push_back(std::move(e));
  std::lock_guard lock(mu_);
  open_log_locked(max_gen + 1);
  return out;
}

bool Persistence::open_log_locked(std::uint64_t gen) {
  if (log_fd_ >= 0) {
    ::fdatasync(log_fd_);
    ::close(log_fd_);
  }
  // Generations stop at kMaxGeneration (only a corrupt or planted file gets near it; 2^62
  // snapshots is centuries). There the log is reused: replaying a log whose records the
  // snapshot already holds is idempotent (ids are unique and each id's records replay in order),
  // so the state read back is the same; only that log is never trimmed.
  gen = std::min(gen, kMaxGeneration);
  log_gen_ = gen;
  log_bytes_ = 0;
  const auto path = dir_ + "/log." + std::to_string(gen);
  log_fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd_ < 0) {
    write_failed("open_log", errno);
    return false;
  }
  fsync_dir(dir_);
  return true;
}

void Persistence::write_failed(const char* op, int err) {
  // Logged for the first few failures and then every 1000th, so a full disk cannot flood logs.
  const auto n = ++write_errors_;
  if (n <= 5 || n % 1000 == 0)
    log::error("cache.persist_failed", {{"op", op}, {"error", std::strerror(err)}, {"dir", dir_}, {"count", n}});
}

bool Persistence::append_record(const std::string& payload) {
  const auto framed = frame(payload);
  std::lock_guard lock(mu_);
  if (log_fd_ < 0 && !open_log_locked(log_gen_)) return false;
  int err = 0;
  const auto before = static_cast<off_t>(log_bytes_.load());
  if (!write_all(log_fd_, framed, err)) {
    // Drop the partial record so the records appended after it stay readable.
    if (::ftruncate(log_fd_, before) != 0) {
    }
    write_failed("append", err);
    return false;
  }
  log_bytes_ += framed.size();
  dirty_ = true;
  return true;
}

bool Persistence::append_insert(const Entry& e) { return append_record(encode_insert(e)); }

bool Persistence::append_erase(std::uint64_t id) {
  Writer w;
  w.u8(kErase);
  w.u64(id);
  return append_record(w.take());
}

bool Persistence::sync() {
  std::lock_guard lock(mu_);
  if (!dirty_ || log_fd_ < 0) return true;
  dirty_ = false;
  if (::fdatasync(log_fd_) != 0) {
    write_failed("fsync", errno);
    return false;
  }
  return true;
}

bool Persistence::snapshot(const std::function<std::vector<Entry>()>& capture) {
  std::uint64_t gen;
  {
    std::lock_guard lock(mu_);
    open_log_locked(log_gen_ + 1);
    gen = log_gen_;
  }
  const auto entries = capture();
  const auto tmp = dir_ + "/snapshot.tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    write_failed("snapshot_open", errno);
    return false;
  }
  bool ok = true;
  int err = 0;
  {
    Writer h;
    h.u8(kHeader);
    h.u32(kVersion);
    h.u64(gen);
    h.u32(static_cast<std::uint32_t>(dim_));
    ok = write_all(fd, frame(h.take()), err);
  }
  std::string buf;
  for (std::size_t i = 0; ok && i < entries.size(); ++i) {
    buf += frame(encode_insert(entries[i]));
    if (buf.size() > (1u << 20) || i + 1 == entries.size()) {
      ok = write_all(fd, buf, err);
      buf.clear();
    }
  }
  if (ok) {
    Writer t;
    t.u8(kTrailer);
    t.u64(entries.size());
    ok = write_all(fd, frame(t.take()), err);
  }
  if (ok && ::fsync(fd) != 0) {
    ok = false;
    err = errno;
  }
  ::close(fd);
  if (ok && ::rename(tmp.c_str(), (dir_ + "/snapshot").c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    write_failed("snapshot", err);
    return false;
  }
  fsync_dir(dir_);
  // Logs older than the snapshot's generation are fully contained in it.
  for (const auto& de : fs::directory_iterator(dir_)) {
    const auto name = de.path().filename().string();
    if (name.rfind("log.", 0) != 0) continue;
    try {
      if (std::stoull(name.substr(4)) < gen) fs::remove(de.path());
    } catch (const std::exception&) {
    }
  }
  return true;
}

}  // namespace tidegate::cache
