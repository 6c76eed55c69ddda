#pragma once
// Deterministic character-n-gram hashing embedder: no model, no network, microseconds per text.
// For tests and for running the cache without weights; it matches shared spelling, not meaning.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tidegate/encoder/embedder.h"

namespace tidegate::encoder {

struct HashEmbedderOptions {
  std::size_t dim = 384;
  std::size_t min_n = 3;  // n-gram lengths in code points, word boundaries included
  std::size_t max_n = 5;
  std::uint64_t seed = 0;  // different seeds give unrelated (but each deterministic) spaces
};

// Text is lowercased (Unicode simple case mapping), split into words on whitespace and
// punctuation, and each word is framed as " word " so n-grams see its boundaries. Every n-gram is
// hashed (FNV-1a 64, then a 64-bit mixer) into one of dim buckets with a +/-1 sign from another
// hash bit, and the vector is L2-normalised. A text without any word gets a fixed unit vector.
// name() is "hash"; embed() is thread-safe and ignores the deadline (it is microseconds).
// Throws std::invalid_argument for dim == 0 or an empty/invalid n range.
std::unique_ptr<Embedder> make_hash_embedder(const HashEmbedderOptions& options = {});

}  // namespace tidegate::encoder
