#include "spend_journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/crc.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace tidegate::cost {
namespace {

constexpr std::string_view kPrefix = "budget_spend.log.";

std::uint32_t crc_of(std::string_view s) {
  boost::crc_32_type crc;
  crc.process_bytes(s.data(), s.size());
  return crc.checksum();
}

// Generations present in dir, ascending.
std::vector<std::uint64_t> generations(const std::string& dir) {
  std::vector<std::uint64_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const auto name = e.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0 || !e.is_regular_file(ec)) continue;  // never read a device
    const auto digits = name.substr(kPrefix.size());
    if (digits.empty() || digits.size() > 19 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    out.push_back(std::stoull(digits));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string SpendJournal::file_name(std::uint64_t gen) { return std::string(kPrefix) + std::to_string(gen); }

SpendJournal::~SpendJournal() {
  if (fd_ >= 0) {
    if (dirty_) ::fdatasync(fd_);
    ::close(fd_);
  }
}

SpendJournal::Replayed SpendJournal::replay(const std::string& dir, std::uint64_t from,
                                            const std::function<void(std::string_view)>& apply) {
  Replayed r;
  r.next_generation = from;
  for (const auto gen : generations(dir)) {
    r.next_generation = std::max(r.next_generation, gen + 1);
    if (gen < from) continue;  // already in the snapshot; a crash came before its deletion
    const auto path = dir + "/" + file_name(gen);
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    std::size_t pos = 0, line_no = 0;
    while (pos < text.size()) {
      ++line_no;
      const auto nl = text.find('\n', pos);
      if (nl == std::string::npos) {  // a write cut short by the crash: never acknowledged
        r.problems.push_back(path + ": torn last record (" + std::to_string(text.size() - pos) + " bytes) skipped");
        break;
      }
      const std::string_view line(text.data() + pos, nl - pos);
      pos = nl + 1;
      unsigned crc = 0;
      if (line.size() < 10 || line[8] != ' ' || std::sscanf(std::string(line.substr(0, 8)).c_str(), "%8x", &crc) != 1 ||
          crc != crc_of(line.substr(9))) {
        r.problems.push_back(path + ": line " + std::to_string(line_no) + " fails its checksum, skipped");
        continue;
      }
      apply(line.substr(9));
      ++r.records;
    }
  }
  return r;
}

bool SpendJournal::open(const std::string& dir, std::uint64_t gen, std::string* error) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const auto path = dir + "/" + file_name(gen);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (error) *error = "open " + path + ": " + std::strerror(errno);
    return false;
  }
  // The older file needs no fdatasync here (this runs under the accounting lock): the
  // snapshot that follows a rotation holds its records and is fsynced itself.
  if (fd_ >= 0) ::close(fd_);
  struct stat st {};
  bytes_ = ::fstat(fd, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  dir_ = dir;
  fd_ = fd;
  gen_ = gen;
  // The new file's directory entry must reach the disk too; that fsync waits for the next
  // sync(), outside the caller's lock (rotation happens under the accounting lock).
  dirty_ = true;
  dir_dirty_ = true;
  return true;
}

bool SpendJournal::append(std::string_view json) {
  if (fd_ < 0) return false;
  char head[10];
  std::snprintf(head, sizeof head, "%08x ", crc_of(json));
  std::string line;
  line.reserve(json.size() + 10);
  line.append(head, 9).append(json).push_back('\n');
  std::size_t done = 0;
  while (done < line.size()) {
    const auto n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // Cut the partial line off, so the next record starts on a line of its own.
      if (done > 0 && ::ftruncate(fd_, static_cast<off_t>(bytes_)) != 0) {
      }
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  bytes_ += line.size();
  dirty_ = true;
  return true;
}

bool SpendJournal::fsync_dir(const std::string& dir) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return false;
  const bool ok = ::fsync(dfd) == 0;
  ::close(dfd);
  return ok;
}

int SpendJournal::take_sync_fd(bool* dir_too) {
  *dir_too = false;
  if (fd_ < 0 || !dirty_) return -1;
  dirty_ = false;
  *dir_too = std::exchange(dir_dirty_, false);
  return ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
}

std::uint64_t SpendJournal::rotate(std::string* error) {
  if (fd_ < 0) return gen_;
  open(dir_, gen_ + 1, error);
  return gen_;
}

void SpendJournal::remove_below(std::uint64_t gen) {
  if (dir_.empty()) return;
  for (const auto g : generations(dir_))
    if (g < gen) ::unlink((dir_ + "/" + file_name(g)).c_str());
}

}  // namespace tidegate::cost
