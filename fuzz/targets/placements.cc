// The routing stream's wire form (gateway/app/placement_wire.cc): what another gateway put in
// the Redis stream, or what a corrupt or hostile writer put there. decode_placements either
// refuses the input or decodes all of it, and then the input is exactly the canonical encoding
// of what it decoded (no byte ignored, nothing read past the end); no placement holds more than
// kMaxPlacementBlocks blocks.
#include <string>

#include "fuzz_util.h"
#include "placement_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto batch = tidegate::app::decode_placements(input);
  if (!batch) return 0;
  for (const auto& p : *batch)
    FUZZ_CHECK(p.blocks.size() <= tidegate::app::kMaxPlacementBlocks, "a placement over the block limit", input);
  FUZZ_CHECK(tidegate::app::encode_placements(*batch) == input, "decoded, but not the encoding of what it decoded",
             input);
  return 0;
}
