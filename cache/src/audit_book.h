#pragma once
// What the audits found, kept per model pool (judged hits, false hits) and per scope (the cut
// its false hits set), saved as one JSON file in the cache's data directory so a restart keeps
// both the audited rate and the tightened decisions. Thread-safe (one reader-writer lock, no I/O
// under it): every lookup with a match reads it, only judged audits write.
#include <boost/json/object.hpp>

#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace tidegate::cache {

struct AuditCounts {
  std::uint64_t judged = 0;      // audits the judge decided
  std::uint64_t false_hits = 0;  // of those, the cached answer was wrong
};

class AuditBook final {
 public:
  explicit AuditBook(std::size_t max_scopes) : max_scopes_(max_scopes) {}

  // A judged audit of a hit decided on `score` in units `kind` ("cosine" similarity or the
  // "verifier" score; 1.0 for an exact-tier hit). A false hit raises the scope's cut to its score.
  // Returns the model's counts after it.
  AuditCounts record(const std::string& model, const std::string& scope_key, const std::string& kind, double score,
                     bool correct);
  // True when audits of this scope refuse a hit at `score`: a hit needs a score above every
  // score at which a hit of this scope was judged wrong. Evidence in other units is ignored.
  bool refuses(const std::string& scope_key, const std::string& kind, double score) const;

  std::map<std::string, AuditCounts> models() const;
  std::size_t tightened_scopes() const;
  boost::json::object stats() const;

  // The file's text (and the version it holds), and its inverse (throws std::runtime_error on a
  // malformed file). A save marks its version saved; a record() racing with it stays dirty.
  std::string serialize(std::uint64_t* version = nullptr) const;
  void restore(const std::string& text);
  bool dirty() const;
  void mark_saved(std::uint64_t version);

 private:
  struct Scope {
    std::string model, kind;
    double cut = -1;  // the highest score judged wrong (-1: none)
    AuditCounts counts;
    std::list<std::string>::iterator lru;
  };
  Scope& scope(const std::string& key);

  const std::size_t max_scopes_;
  mutable std::shared_mutex mu_;
  std::map<std::string, AuditCounts> models_;
  std::unordered_map<std::string, Scope> scopes_;
  std::list<std::string> lru_;  // most recently judged first
  std::uint64_t version_ = 0, saved_version_ = 0;
};

// Saves and loads the book at `path` (write to path.tmp, fsync, rename: a crash leaves the old
// file or the new one). load() returns a problem to report, or nothing; a file that cannot be
// read is renamed `.corrupt` and the book starts empty.
bool save_audit_book(AuditBook& book, const std::string& path, std::string* error);
std::optional<std::string> load_audit_book(AuditBook& book, const std::string& path);

}  // namespace tidegate::cache
