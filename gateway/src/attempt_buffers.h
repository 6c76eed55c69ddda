#pragma once
// The buffers of one upstream attempt, recycled through the worker that runs it.
#include <boost/beast/core/flat_buffer.hpp>

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace tidegate::gateway {

// Buffers an attempt uses, recycled through the worker (AttemptBufferPool): a request that
// reuses a pooled connection allocates none of them.
struct AttemptBuffers {
  // Bounded like the client's buffer: the parser consumes bodies as they come, so only a head
  // (Beast's 8 KiB header limit), a chunk header with its extensions, or a trailer section
  // can make it grow, and a replica sending an endless one fails at this size instead of
  // taking the gateway's memory.
  static constexpr std::size_t kInBytes = 256 * 1024;
  static constexpr std::size_t kChunkBytes = 16384;
  AttemptBuffers() {
    // Beast reads at most the buffer's free capacity (512 bytes for a new flat_buffer): without
    // this, a 4 KiB upstream answer took eight reads, each relayed as its own write.
    in.reserve(kChunkBytes);
  }
  void clear() {
    in.clear();
    head.clear();
    body.clear();
  }
  boost::beast::flat_buffer in{kInBytes};
  std::array<char, kChunkBytes> chunk{};
  std::string head;  // the upstream request head, formatted by the owner
  std::string body;  // a non-streamed response body
};

class AttemptBufferPool final {
 public:
  std::unique_ptr<AttemptBuffers> take() {
    if (spare_.empty()) return std::make_unique<AttemptBuffers>();
    auto b = std::move(spare_.back());
    spare_.pop_back();
    return b;
  }
  void give_back(std::unique_ptr<AttemptBuffers> b) {
    // A large body's buffer is not kept: an idle worker should not hold one big answer.
    if (!b || spare_.size() >= kMaxSpare || b->body.capacity() > kKeptBodyBytes) return;
    b->clear();
    spare_.push_back(std::move(b));
  }

 private:
  static constexpr std::size_t kMaxSpare = 64;
  static constexpr std::size_t kKeptBodyBytes = 64 * 1024;
  std::vector<std::unique_ptr<AttemptBuffers>> spare_;
};

}  // namespace tidegate::gateway
