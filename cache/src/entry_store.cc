#include "tidegate/cache/entry_store.h"

#include <chrono>

#include "tidegate/cache/policy.h"

namespace tidegate::cache {
namespace {

std::string text_key(const std::string& text) { return sha256_hex(text); }
std::string normal_key(const std::string& text) { return sha256_hex(normalize_prompt(text)); }

}  // namespace

std::string normalize_prompt(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool space = false;
  for (const char ch : text) {
    if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(ch);
  }
  return out;
}

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::size_t Entry::bytes() const {
  // Payload plus a fixed allowance for the map, LRU node and index bookkeeping.
  return scope_key.size() + model.size() + tenant.size() + text.size() + answer.content.size() +
         answer.finish_reason.size() + vector.size() * sizeof(float) + 256;
}

std::string_view to_string(EvictReason r) {
  switch (r) {
    case EvictReason::kTtl: return "ttl";
    case EvictReason::kEntries: return "max_entries";
    case EvictReason::kBytes: return "max_bytes";
    case EvictReason::kAdmin: return "admin";
    case EvictReason::kReplaced: return "replaced";
  }
  return "unknown";
}

EntryStore::EntryStore(std::size_t dim, IndexConfig index, std::uint64_t max_entries, std::uint64_t max_bytes,
                       IndexFactory gpu_index)
    : dim_(dim),
      index_config_(index),
      max_entries_(max_entries),
      max_bytes_(max_bytes),
      gpu_index_(index.type == IndexConfig::Type::kGpuFlat ? std::move(gpu_index) : IndexFactory{}) {}

void EntryStore::insert(Entry entry, const EvictFn& on_evict) {
  if (entry.vector.size() != dim_) throw std::invalid_argument("entry vector has the wrong dimension");
  if (entry.id == 0) entry.id = next_id();
  reserve_ids_above(entry.id);
  std::unique_lock lock(mu_);
  const auto tk = text_key(entry.text);
  if (const auto sit = scopes_.find(entry.scope_key); sit != scopes_.end())
    if (const auto it = sit->second.by_text.find(tk); it != sit->second.by_text.end())
      erase_locked(it->second, EvictReason::kReplaced, on_evict);  // may drop the scope
  const std::string scope_key = entry.scope_key;
  auto& sc = scopes_[scope_key];
  if (!sc.index && !sc.gpu)
    sc.index = std::make_shared<FaissVectorIndex>(dim_, index_config_, IndexConfig::Type::kFlat);
  const auto id = entry.id;
  const auto vid = static_cast<std::int64_t>(id);
  sc.active().add(1, entry.vector.data(), &vid);
  sc.by_text[tk] = id;
  sc.by_normal[normal_key(entry.text)] = id;  // the newest entry with this normalised text
  bytes_ += entry.bytes();
  std::list<std::uint64_t>::iterator pos;
  {
    std::lock_guard l(lru_mu_);
    lru_.push_front(id);
    pos = lru_.begin();
  }
  entries_.emplace(id, Slot{std::move(entry), pos});
  while (entries_.size() > max_entries_ || bytes_ > max_bytes_) {
    const bool by_count = entries_.size() > max_entries_;
    std::uint64_t victim;
    {
      std::lock_guard l(lru_mu_);
      victim = lru_.back();
    }
    erase_locked(victim, by_count ? EvictReason::kEntries : EvictReason::kBytes, on_evict);
  }
  if (gpu_index_) maybe_promote_to_gpu_locked(scope_key);
}

// Synchronous, under the unique lock: one bulk upload of flat_max vectors happens once per scope
// and takes milliseconds, which keeps the move free of the journal a background rebuild needs.
// Any failure (no memory on the device, a CUDA error) leaves the scope on its CPU index.
void EntryStore::maybe_promote_to_gpu_locked(const std::string& scope_key) {
  const auto sit = scopes_.find(scope_key);
  if (sit == scopes_.end() || sit->second.gpu || sit->second.index->size() <= index_config_.flat_max) return;
  auto& scope = sit->second;
  std::vector<float> vectors;
  std::vector<std::int64_t> ids;
  vectors.reserve(scope.by_text.size() * dim_);
  ids.reserve(scope.by_text.size());
  for (const auto& [text, id] : scope.by_text) {
    const auto it = entries_.find(id);
    if (it == entries_.end()) continue;
    vectors.insert(vectors.end(), it->second.entry.vector.begin(), it->second.entry.vector.end());
    ids.push_back(static_cast<std::int64_t>(id));
  }
  try {
    auto gpu = gpu_index_();
    if (!gpu) return;
    gpu->add(ids.size(), vectors.data(), ids.data());
    scope.gpu = std::move(gpu);
    scope.index.reset();
  } catch (const std::exception&) {
    // Stays on the CPU; the next insert into this scope tries again.
  }
}

bool EntryStore::erase_locked(std::uint64_t id, EvictReason reason, const EvictFn& on_evict) {
  const auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  const auto& e = it->second.entry;
  if (on_evict) on_evict(e, reason);
  const auto sit = scopes_.find(e.scope_key);
  if (sit != scopes_.end()) {
    sit->second.active().remove(static_cast<std::int64_t>(id));
    sit->second.by_text.erase(text_key(e.text));
    if (const auto nit = sit->second.by_normal.find(normal_key(e.text)); nit != sit->second.by_normal.end() && nit->second == id)
      sit->second.by_normal.erase(nit);
    if (sit->second.by_text.empty()) scopes_.erase(sit);
  }
  bytes_ -= e.bytes();
  {
    std::lock_guard l(lru_mu_);
    lru_.erase(it->second.lru);
  }
  entries_.erase(it);
  return true;
}

std::optional<Match> EntryStore::best(const std::string& scope_key, const float* query, std::int64_t now_ms) const {
  std::shared_lock lock(mu_);
  const auto sit = scopes_.find(scope_key);
  if (sit == scopes_.end()) return std::nullopt;
  // A few candidates so that an expired best match does not hide a live second one.
  constexpr std::size_t kCandidates = 4;
  const auto hits = sit->second.active().search(1, query, kCandidates);
  for (const auto& h : hits) {
    if (h.id < 0) break;
    const auto it = entries_.find(static_cast<std::uint64_t>(h.id));
    if (it == entries_.end()) continue;
    const auto& e = it->second.entry;
    // Belt and braces: the index is per scope, but never serve across scopes even if a bug
    // put a vector in the wrong index.
    if (e.scope_key != scope_key || e.expired(now_ms)) continue;
    std::lock_guard l(lru_mu_);  // last_hit_ms is written under it
    return Match{e, h.score};
  }
  return std::nullopt;
}

std::vector<Match> EntryStore::candidates(const std::string& scope_key, const float* query, std::size_t k, float floor,
                                          std::int64_t now_ms) const {
  std::vector<Match> out;
  std::shared_lock lock(mu_);
  const auto sit = scopes_.find(scope_key);
  if (sit == scopes_.end() || k == 0) return out;
  // A few more than k, so that expired entries do not take the places of live ones.
  const auto hits = sit->second.active().search(1, query, k + 4);
  for (const auto& h : hits) {
    if (h.id < 0 || h.score < floor || out.size() == k) break;
    const auto it = entries_.find(static_cast<std::uint64_t>(h.id));
    if (it == entries_.end()) continue;
    const auto& e = it->second.entry;
    if (e.scope_key != scope_key || e.expired(now_ms)) continue;
    std::lock_guard l(lru_mu_);  // last_hit_ms is written under it
    out.push_back(Match{e, h.score});
  }
  return out;
}

std::optional<Match> EntryStore::exact(const std::string& scope_key, const std::string& text, std::int64_t now_ms) const {
  const auto normal = normalize_prompt(text);
  const auto key = sha256_hex(normal);
  std::shared_lock lock(mu_);
  const auto sit = scopes_.find(scope_key);
  if (sit == scopes_.end()) return std::nullopt;
  const auto nit = sit->second.by_normal.find(key);
  if (nit == sit->second.by_normal.end()) return std::nullopt;
  const auto it = entries_.find(nit->second);
  if (it == entries_.end()) return std::nullopt;
  const auto& e = it->second.entry;
  if (e.scope_key != scope_key || e.expired(now_ms) || normalize_prompt(e.text) != normal) return std::nullopt;
  std::lock_guard l(lru_mu_);
  return Match{e, 1.0f};
}

void EntryStore::touch(std::uint64_t id, std::int64_t now_ms) {
  std::shared_lock lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  std::lock_guard l(lru_mu_);
  // Entry fields other than last_hit_ms are immutable once stored; last_hit_ms is only
  // read and written under lru_mu_.
  const_cast<Entry&>(it->second.entry).last_hit_ms = now_ms;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
}

bool EntryStore::erase(std::uint64_t id, const EvictFn& on_evict) {
  std::unique_lock lock(mu_);
  return erase_locked(id, EvictReason::kAdmin, on_evict);
}

std::size_t EntryStore::erase_matching(const std::optional<std::string>& tenant,
                                       const std::optional<std::string>& model, const EvictFn& on_evict) {
  std::unique_lock lock(mu_);
  std::vector<std::uint64_t> victims;
  for (const auto& [id, slot] : entries_)
    if ((!tenant || slot.entry.tenant == *tenant) && (!model || slot.entry.model == *model)) victims.push_back(id);
  for (auto id : victims) erase_locked(id, EvictReason::kAdmin, on_evict);
  return victims.size();
}

std::size_t EntryStore::expire(std::int64_t now_ms, const EvictFn& on_evict) {
  std::vector<std::uint64_t> victims;
  {
    std::shared_lock lock(mu_);
    for (const auto& [id, slot] : entries_)
      if (slot.entry.expired(now_ms)) victims.push_back(id);
  }
  if (victims.empty()) return 0;
  std::unique_lock lock(mu_);
  std::size_t n = 0;
  for (auto id : victims) {
    const auto it = entries_.find(id);
    if (it != entries_.end() && it->second.entry.expired(now_ms)) n += erase_locked(id, EvictReason::kTtl, on_evict);
  }
  return n;
}

std::size_t EntryStore::maintain_indexes() {
  std::vector<std::pair<std::shared_ptr<FaissVectorIndex>, IndexConfig::Type>> work;
  {
    std::shared_lock lock(mu_);
    // gpu-flat without a GPU factory is the CPU path, i.e. HNSW for big scopes.
    const bool to_hnsw = index_config_.type == IndexConfig::Type::kHnsw ||
                         (index_config_.type == IndexConfig::Type::kGpuFlat && !gpu_index_);
    for (const auto& [key, scope] : scopes_) {
      const auto& ix = scope.index;
      if (!ix) continue;  // on the GPU: removals free slots there, nothing to rebuild
      if (to_hnsw && ix->type() == IndexConfig::Type::kFlat &&
          ix->size() > index_config_.flat_max)
        work.emplace_back(ix, IndexConfig::Type::kHnsw);
      else if (ix->needs_compaction())
        work.emplace_back(ix, ix->type());
    }
  }
  // Outside the store lock: a rebuild of a big scope must not stall inserts.
  for (auto& [ix, type] : work) ix->compact(type);
  return work.size();
}

std::vector<Entry> EntryStore::copy_all() const {
  std::shared_lock lock(mu_);
  std::lock_guard l(lru_mu_);
  std::vector<Entry> out;
  out.reserve(entries_.size());
  for (const auto& [id, slot] : entries_) out.push_back(slot.entry);
  return out;
}

std::size_t EntryStore::size() const {
  std::shared_lock lock(mu_);
  return entries_.size();
}
std::uint64_t EntryStore::bytes() const {
  std::shared_lock lock(mu_);
  return bytes_;
}
std::size_t EntryStore::scopes() const {
  std::shared_lock lock(mu_);
  return scopes_.size();
}
std::size_t EntryStore::gpu_scopes() const {
  std::shared_lock lock(mu_);
  std::size_t n = 0;
  for (const auto& [key, scope] : scopes_) n += scope.gpu != nullptr;
  return n;
}

void EntryStore::reserve_ids_above(std::uint64_t id) {
  auto cur = next_id_.load();
  while (cur <= id && !next_id_.compare_exchange_weak(cur, id + 1)) {
  }
}

}  // namespace tidegate::cache
