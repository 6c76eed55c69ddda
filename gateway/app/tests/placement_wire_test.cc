// The routing stream's wire form (placement_wire.h): batches round-trip exactly, and anything
// that is not a whole batch (every truncation, a wrong version, a block count past the end or the
// limit) is refused rather than half-applied. (The stream itself, through a real Redis and three
// gateways: tests/multi_gateway/test_redis_routing.py.)
#include <gtest/gtest.h>

#include <random>

#include "placement_wire.h"

using tidegate::app::decode_placements;
using tidegate::app::encode_placements;
using tidegate::gateway::RoutePlacement;

namespace {

std::vector<RoutePlacement> sample_batch() {
  std::mt19937_64 rng(9);
  std::vector<RoutePlacement> batch;
  batch.push_back({"llama-3-8b", "replica-0", {}, 0x5e55ull | 1});  // a session pin alone
  RoutePlacement p{"m", "r-2", {}, 0};
  for (int i = 0; i < 300; ++i) p.blocks.push_back(rng());
  batch.push_back(p);
  batch.push_back({"", std::string(70000, 'x'), {1, 2, 3}, ~0ull});  // ids longer than a u16 are cut
  return batch;
}

}  // namespace

TEST(RoutingStreamWire, ABatchRoundTrips) {
  const auto batch = sample_batch();
  const auto wire = encode_placements(batch);
  const auto back = decode_placements(wire);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->size(), batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ((*back)[i].model, batch[i].model);
    EXPECT_EQ((*back)[i].replica_id, batch[i].replica_id.substr(0, 0xffff));
    EXPECT_EQ((*back)[i].session, batch[i].session);
    EXPECT_EQ((*back)[i].blocks, batch[i].blocks);
  }
  const auto empty = decode_placements(encode_placements({}));
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(RoutingStreamWire, AnythingButAWholeBatchIsRefused) {
  const auto wire = encode_placements(sample_batch());
  // Every proper prefix ends inside a record (or is empty) except the version byte alone and the
  // ends of whole records, which are smaller whole batches.
  std::vector<std::size_t> record_ends{1};
  {
    auto batch = sample_batch();
    for (std::size_t k = 1; k <= batch.size(); ++k)
      record_ends.push_back(encode_placements(std::span(batch).first(k)).size());
  }
  for (std::size_t n = 0; n < wire.size(); ++n) {
    const bool whole = std::find(record_ends.begin(), record_ends.end(), n) != record_ends.end();
    EXPECT_EQ(decode_placements(std::string_view(wire).substr(0, n)).has_value(), whole) << "prefix of " << n << " bytes";
  }
  auto wrong_version = wire;
  wrong_version[0] = 2;
  EXPECT_FALSE(decode_placements(wrong_version));
  // A block count far past the data (and past the limit), as a corrupt or hostile entry would say.
  std::string huge = encode_placements(std::vector<RoutePlacement>{{"m", "r", {}, 0}});
  huge.replace(huge.size() - 4, 4, std::string("\xff\xff\xff\x7f", 4));
  EXPECT_FALSE(decode_placements(huge));
}
