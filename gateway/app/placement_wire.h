#pragma once
// The routing stream's wire form (shared_routing.h): a batch of RoutePlacements as one binary
// field. Pure; read from Redis, so the decoder trusts nothing (fuzz/targets/placements.cc).
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tidegate/gateway/gateway.h"

namespace tidegate::app {

// The wire form of a batch (the stream entry's "data" field), little-endian: a version
// byte (1), then per placement: u16 length + model, u16 length + replica id, u64 session,
// u32 block count + that many u64 block hashes.
std::string encode_placements(std::span<const gateway::RoutePlacement> placements);
// nullopt when `data` is not a whole batch of this version (truncated, a length past the end,
// more than kMaxPlacementBlocks blocks in one placement).
std::optional<std::vector<gateway::RoutePlacement>> decode_placements(std::string_view data);
inline constexpr std::size_t kMaxPlacementBlocks = 1 << 16;

}  // namespace tidegate::app
