#include "tidegate/kernels/slot_map.h"

#include <algorithm>
#include <functional>

namespace tidegate::kernels {

std::optional<std::size_t> SlotMap::assign(std::int64_t id) {
  if (by_id_.contains(id)) return std::nullopt;
  std::size_t slot;
  if (!free_.empty()) {
    // Lowest free slot first keeps live rows packed towards the front of the scan.
    std::pop_heap(free_.begin(), free_.end(), std::greater<>());
    slot = free_.back();
    free_.pop_back();
    ids_[slot] = id;
  } else {
    slot = ids_.size();
    ids_.push_back(id);
  }
  by_id_.emplace(id, slot);
  return slot;
}

std::optional<std::size_t> SlotMap::release(std::int64_t id) {
  const auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  const std::size_t slot = it->second;
  by_id_.erase(it);
  ids_[slot] = -1;
  free_.push_back(slot);
  std::push_heap(free_.begin(), free_.end(), std::greater<>());
  return slot;
}

std::int64_t SlotMap::id_at(std::size_t slot) const { return slot < ids_.size() ? ids_[slot] : -1; }

std::optional<std::size_t> SlotMap::slot_of(std::int64_t id) const {
  const auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tidegate::kernels
