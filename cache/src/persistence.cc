#include "tidegate/cache/persistence.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "tidegate/common/config_error.h"
#include "tidegate/common/log.h"

namespace tidegate::cache {
namespace fs = std::filesystem;
namespace {

constexpr std::uint64_t kMaxGeneration = std::uint64_t{1} << 62;
constexpr std::int64_t kMaxTimeMs = std::int64_t{1} << 52;  // ms since 1970: past the year 100,000

constexpr std::uint32_t kMagic = 0x31434754;  // "TGC1"
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kMaxRecord = 64u << 20;
enum RecordType : std::uint8_t { kHeader = 0, kInsert = 1, kErase = 2, kTrailer = 3 };

std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}

class Writer {
 public:
  void u8(std::uint8_t v) { s_.push_back(static_cast<char>(v)); }
  void u32(std::uint32_t v) { raw(&v, 4); }
  void u64(std::uint64_t v) { raw(&v, 8); }
  void i64(std::int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(const std::string& v) {
    u32(static_cast<std::uint32_t>(v.size()));
    s_ += v;
  }
  void raw(const void* p, std::size_t n) { s_.append(static_cast<const char*>(p), n); }
  std::string take() { return std::move(s_); }

 private:
  std::string s_;
};

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  template <typename T>
  T num() {
    T v;
    need(sizeof(T));
    std::memcpy(&v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const auto n = num<std::uint32_t>();
    need(n);
    std::string v(s_.substr(pos_, n));
    pos_ += n;
    return v;
  }
  void floats(std::vector<float>& out, std::size_t n) {
    need(n * sizeof(float));
    out.resize(n);
    std::memcpy(out.data(), s_.data() + pos_, n * sizeof(float));
    pos_ += n * sizeof(float);
  }

 private:
  void need(std::size_t n) const {
    if (pos_ + n > s_.size()) throw std::runtime_error("record too short");
  }
  std::string_view s_;
  std::size_t pos_ = 0;
};

std::string frame(const std::string& payload) {
  Writer w;
  w.u32(kMagic);
  w.u32(static_cast<std::uint32_t>(payload.size()));
  w.u32(crc32(payload.data(), payload.size()));
  w.raw(payload.data(), payload.size());
  return w.take();
}

std::string encode_insert(const Entry& e) {
  Writer w;
  w.u8(kInsert);
  w.u64(e.id);
  w.i64(e.created_ms);
  w.i64(e.last_hit_ms);
  w.f64(e.ttl_s);
  w.str(e.scope_key);
  w.str(e.model);
  w.str(e.tenant);
  w.str(e.text);
  w.str(e.answer.content);
  w.str(e.answer.finish_reason);
  w.i64(e.answer.prompt_tokens);
  w.i64(e.answer.completion_tokens);
  w.u32(static_cast<std::uint32_t>(e.vector.size()));
  w.raw(e.vector.data(), e.vector.size() * sizeof(float));
  return w.take();
}

Entry decode_insert(Reader& r, std::size_t dim) {
  Entry e;
  e.id = r.num<std::uint64_t>();
  e.created_ms = r.num<std::int64_t>();
  e.last_hit_ms = r.num<std::int64_t>();
  e.ttl_s = r.num<double>();
  // Times a live entry can have; anything else is a corrupt record (NaN or 1e300 reached
  // Entry::expired's double-to-integer conversion, undefined behaviour: the fuzzer's K6).
  if (!(e.ttl_s >= 0 && e.ttl_s <= kMaxDurationSeconds) || e.created_ms < 0 || e.created_ms > kMaxTimeMs ||
      e.last_hit_ms < 0 || e.last_hit_ms > kMaxTimeMs)
    throw std::runtime_error("entry times out of range");
  e.scope_key = r.str();
  e.model = r.str();
  e.tenant = r.str();
  e.text = r.str();
  e.answer.content = r.str();
  e.answer.finish_reason = r.str();
  e.answer.prompt_tokens = r.num<std::int64_t>();
  e.answer.completion_tokens = r.num<std::int64_t>();
  const auto n = r.num<std::uint32_t>();
  if (n != dim) throw std::runtime_error("vector dimension " + std::to_string(n) + " != " + std::to_string(dim));
  r.floats(e.vector, n);
  return e;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Calls `on_record` for each intact record; returns "" or a description of where it stopped.
std::string scan(const std::string& data, const std::function<void(std::string_view)>& on_record) {
  std::size_t pos = 0;
  while (pos < data.size()) {
    if (data.size() - pos < 12) return "torn record header at byte " + std::to_string(pos);
    std::uint32_t magic, len, crc;
    std::memcpy(&magic, data.data() + pos, 4);
    std::memcpy(&len, data.data() + pos + 4, 4);
    std::memcpy(&crc, data.data() + pos + 8, 4);
    if (magic != kMagic) return "bad record magic at byte " + std::to_string(pos);
    if (len > kMaxRecord) return "record too large at byte " + std::to_string(pos);
    if (data.size() - pos - 12 < len) return "torn record at byte " + std::to_string(pos);
    const std::string_view payload(data.data() + pos + 12, len);
    if (crc32(payload.data(), payload.size()) != crc) return "checksum mismatch at byte " + std::to_string(pos);
    try {
      on_record(payload);
    } catch (const std::exception& e) {
      return std::string("bad record at byte ") + std::to_string(pos) + " (" + e.what() + ")";
    }
    pos += 12 + len;
  }
  return "";
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

std::uint32_t crc32(const void* data, std::size_t n) {
  static const auto table = make_crc_table();
  std::uint32_t c = 0xffffffffu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
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
