#include "audit_book.h"

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "tidegate/cache/persistence.h"

namespace tidegate::cache {

AuditBook::Scope& AuditBook::scope(const std::string& key) {
  auto it = scopes_.find(key);
  if (it != scopes_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second;
  }
  lru_.push_front(key);
  auto& s = scopes_[key];
  s.lru = lru_.begin();
  // Bounded: one scope per conversation could otherwise grow the book without end. The scope
  // forgotten is the one judged least recently, so a scope being audited keeps its evidence.
  while (scopes_.size() > max_scopes_ && lru_.size() > 1) {
    scopes_.erase(lru_.back());
    lru_.pop_back();
  }
  return s;
}

AuditCounts AuditBook::record(const std::string& model, const std::string& scope_key, const std::string& kind,
                              double score, bool correct) {
  std::lock_guard lock(mu_);
  auto& m = models_[model];
  ++m.judged;
  if (!correct) ++m.false_hits;
  auto& s = scope(scope_key);
  if (s.kind != kind) s.cut = -1;  // the pool changed how it decides: older evidence is in other units
  s.model = model;
  s.kind = kind;
  ++s.counts.judged;
  if (!correct) {
    ++s.counts.false_hits;
    s.cut = std::max(s.cut, score);  // tighten only, never loosen
  }
  ++version_;
  return m;
}

bool AuditBook::refuses(const std::string& scope_key, const std::string& kind, double score) const {
  std::shared_lock lock(mu_);
  const auto it = scopes_.find(scope_key);
  if (it == scopes_.end() || it->second.kind != kind || it->second.cut < 0) return false;
  return !(score > it->second.cut);
}

std::map<std::string, AuditCounts> AuditBook::models() const {
  std::shared_lock lock(mu_);
  return models_;
}

std::size_t AuditBook::tightened_scopes() const {
  std::shared_lock lock(mu_);
  std::size_t n = 0;
  for (const auto& [key, s] : scopes_) n += s.cut >= 0;
  return n;
}

boost::json::object AuditBook::stats() const {
  std::shared_lock lock(mu_);
  boost::json::object o;
  std::size_t tightened = 0;
  for (const auto& [key, s] : scopes_) tightened += s.cut >= 0;
  o["scopes_audited"] = scopes_.size();
  o["scopes_tightened"] = tightened;
  return o;
}

std::string AuditBook::serialize(std::uint64_t* version) const {
  std::shared_lock lock(mu_);
  if (version) *version = version_;
  boost::json::object root;
  root["version"] = 1;
  boost::json::object models;
  for (const auto& [name, c] : models_) models[name] = {{"judged", c.judged}, {"false_hits", c.false_hits}};
  root["models"] = std::move(models);
  boost::json::array scopes;
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {  // oldest first: restore() replays in order
    const auto& s = scopes_.at(*it);
    scopes.push_back({{"key", *it}, {"model", s.model}, {"kind", s.kind}, {"cut", s.cut},
                      {"judged", s.counts.judged}, {"false_hits", s.counts.false_hits}});
  }
  root["scopes"] = std::move(scopes);
  return boost::json::serialize(root);
}

void AuditBook::restore(const std::string& text) {
  boost::system::error_code ec;
  const auto v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) throw std::runtime_error("not a JSON object");
  try {
    const auto& root = v.as_object();
    if (root.at("version").to_number<int>() != 1) throw std::runtime_error("unknown version");
    std::lock_guard lock(mu_);
    for (const auto& [name, c] : root.at("models").as_object())
      models_[std::string(name)] = {c.at("judged").to_number<std::uint64_t>(),
                                    c.at("false_hits").to_number<std::uint64_t>()};
    for (const auto& sv : root.at("scopes").as_array()) {
      const auto& so = sv.as_object();
      auto& s = scope(std::string(so.at("key").as_string()));
      s.model = std::string(so.at("model").as_string());
      s.kind = std::string(so.at("kind").as_string());
      s.cut = so.at("cut").to_number<double>();
      s.counts = {so.at("judged").to_number<std::uint64_t>(), so.at("false_hits").to_number<std::uint64_t>()};
    }
    saved_version_ = version_;
  } catch (const std::exception& e) {
    std::lock_guard lock(mu_);
    models_.clear();
    scopes_.clear();
    lru_.clear();
    throw std::runtime_error(std::string("malformed: ") + e.what());
  }
}

bool AuditBook::dirty() const {
  std::shared_lock lock(mu_);
  return version_ != saved_version_;
}

void AuditBook::mark_saved(std::uint64_t version) {
  std::lock_guard lock(mu_);
  saved_version_ = std::max(saved_version_, version);
}

bool save_audit_book(AuditBook& book, const std::string& path, std::string* error) {
  if (!book.dirty()) return true;
  std::uint64_t version = 0;
  const auto text = book.serialize(&version);
  if (!write_file_durably(path, text, error)) return false;  // still dirty: the next pass retries
  book.mark_saved(version);
  return true;
}

std::optional<std::string> load_audit_book(AuditBook& book, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    book.restore(text);
    return std::nullopt;
  } catch (const std::exception& e) {
    std::filesystem::rename(path, path + ".corrupt", ec);
    return path + ": " + e.what() + " (renamed .corrupt; audits start afresh)";
  }
}

}  // namespace tidegate::cache
