#pragma once
// Append-only journal of settled spend, so a crash loses none of it. Each finished request
// (or cache hit) appends one line, `<crc32 hex> <json>\n`, with write(2) before its accounting
// returns: a process crash (kill -9, abort) loses nothing that was charged. fdatasync runs in
// batches (sync(), about once a second), so a machine crash loses at most that window.
//
// Journals are numbered files `budget_spend.log.<generation>`. The snapshot (budget_spend.json)
// says which generation it starts from: flush() rotates to a new generation under the
// accounting lock, snapshots, and only then deletes the older files. A crash anywhere in that
// sequence leaves spend in the snapshot, in a journal the snapshot does not cover, or both
// only for files it is known to cover; never counted twice, never lost.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tidegate::cost {

class SpendJournal final {
 public:
  SpendJournal() = default;
  ~SpendJournal();
  SpendJournal(const SpendJournal&) = delete;
  SpendJournal& operator=(const SpendJournal&) = delete;

  struct Replayed {
    std::uint64_t next_generation = 0;  // first generation free for appends
    std::size_t records = 0;
    std::vector<std::string> problems;  // torn tails and corrupt lines (skipped)
  };
  // Calls `apply` with each intact record's JSON text, generations >= `from` in order.
  static Replayed replay(const std::string& dir, std::uint64_t from, const std::function<void(std::string_view)>& apply);

  // Appends go to generation `gen` in `dir` (created when missing). False: cannot open.
  bool open(const std::string& dir, std::uint64_t gen, std::string* error);
  bool is_open() const { return fd_ >= 0; }
  // One record. False when the disk refused it (the partial line is cut off again, so the
  // records after it stay readable); the caller counts it.
  bool append(std::string_view json);
  // For syncing outside the caller's lock: a dup of the file when something was appended
  // since the last sync (fdatasync and close it), else -1; *dir_too: a new generation was
  // opened since, so fsync_dir(dir()) as well.
  int take_sync_fd(bool* dir_too);
  static bool fsync_dir(const std::string& dir);
  const std::string& dir() const { return dir_; }
  // Starts generation+1 and returns it; appends made before are all in older files.
  std::uint64_t rotate(std::string* error);
  // Deletes generations below `gen` (the snapshot now holds them).
  void remove_below(std::uint64_t gen);
  std::uint64_t generation() const { return gen_; }

  static std::string file_name(std::uint64_t gen);

 private:
  std::string dir_;
  int fd_ = -1;
  std::uint64_t gen_ = 0;
  std::uint64_t bytes_ = 0;
  bool dirty_ = false;
  bool dir_dirty_ = false;  // a file was created since the directory was last fsynced
};

}  // namespace tidegate::cost
