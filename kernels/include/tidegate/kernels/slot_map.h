#pragma once
// Host-side bookkeeping of the GPU flat index: which device row (slot) holds which caller id.
// Removed slots go on a free list and are reused before the matrix grows, so the scanned range
// stays as small as the live set allows. Not thread-safe; the index serialises access.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace tidegate::kernels {

class SlotMap final {
 public:
  // Slot for a new id: a freed one (lowest first) or the next never-used one. nullopt when the
  // id is already present.
  std::optional<std::size_t> assign(std::int64_t id);
  // Frees the id's slot; nullopt when the id is unknown.
  std::optional<std::size_t> release(std::int64_t id);
  // Id stored in a slot, -1 for a free or never-used slot.
  std::int64_t id_at(std::size_t slot) const;
  std::optional<std::size_t> slot_of(std::int64_t id) const;

  std::size_t size() const { return by_id_.size(); }
  // One past the highest slot ever used: the rows a scan has to cover.
  std::size_t used_slots() const { return ids_.size(); }

 private:
  std::vector<std::int64_t> ids_;  // slot -> id (-1 when free)
  std::unordered_map<std::int64_t, std::size_t> by_id_;
  std::vector<std::size_t> free_;  // min-heap of free slots
};

}  // namespace tidegate::kernels
