// The routing stream's wire form (placement_wire.h).
#include "placement_wire.h"

#include <algorithm>
#include <cstdint>

namespace tidegate::app {
namespace {

constexpr std::uint8_t kVersion = 1;

template <class T>
void put(std::string& out, T v) {  // little-endian, whatever the host
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff));
}

template <class T>
bool get(std::string_view& in, T& v) {
  if (in.size() < sizeof(T)) return false;
  std::uint64_t x = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) x |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  v = static_cast<T>(x);
  in.remove_prefix(sizeof(T));
  return true;
}

void put_text(std::string& out, std::string_view s) {
  const auto n = std::min<std::size_t>(s.size(), 0xffff);  // model names and replica ids are short
  put<std::uint16_t>(out, static_cast<std::uint16_t>(n));
  out.append(s.substr(0, n));
}

bool get_text(std::string_view& in, std::string& s) {
  std::uint16_t n = 0;
  if (!get(in, n) || in.size() < n) return false;
  s.assign(in.substr(0, n));
  in.remove_prefix(n);
  return true;
}

}  // namespace

std::string encode_placements(std::span<const gateway::RoutePlacement> placements) {
  std::string out;
  std::size_t size = 1;
  for (const auto& p : placements) size += 16 + p.model.size() + p.replica_id.size() + 8 * p.blocks.size();
  out.reserve(size);
  out.push_back(static_cast<char>(kVersion));
  for (const auto& p : placements) {
    put_text(out, p.model);
    put_text(out, p.replica_id);
    put<std::uint64_t>(out, p.session);
    const auto n = std::min(p.blocks.size(), kMaxPlacementBlocks);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(n));
    for (std::size_t i = 0; i < n; ++i) put<std::uint64_t>(out, p.blocks[i]);
  }
  return out;
}

std::optional<std::vector<gateway::RoutePlacement>> decode_placements(std::string_view in) {
  std::uint8_t version = 0;
  if (!get(in, version) || version != kVersion) return std::nullopt;
  std::vector<gateway::RoutePlacement> out;
  while (!in.empty()) {
    gateway::RoutePlacement p;
    std::uint32_t n = 0;
    if (!get_text(in, p.model) || !get_text(in, p.replica_id) || !get(in, p.session) || !get(in, n)) return std::nullopt;
    if (n > kMaxPlacementBlocks || in.size() < std::size_t{n} * 8) return std::nullopt;
    p.blocks.resize(n);
    for (auto& b : p.blocks) get(in, b);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace tidegate::app
