#pragma once
// tidegate-sim's settings, parsed once from the command line and shared read-only.
#include "tidegate/sim/timing_model.h"

#include <cstdint>
#include <memory>
#include <string>

namespace tidegate::sim {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string model = "sim";
  TimingParams timing;
  bool echo = false;
  std::uint64_t seed = 1;
  double fail_rate = 0.0;          // fraction of POSTs answered 500
  std::int64_t die_after = 0;      // 0 = never; else _exit once the Nth POST has started
  std::int32_t max_tokens_default = 64;  // replies without max_tokens get 1..this tokens
  int threads = 2;
  double wake_s = 2.0;             // sleep mode: POST /wake_up to serving again
  int embedding_dim = 384;         // all-MiniLM-L6-v2's width, so cache code sees real shapes
  std::uint64_t max_body_bytes = 64ull << 20;
};

// Throws std::invalid_argument with a message naming the flag.
std::shared_ptr<const ServerConfig> parse_flags(int argc, char** argv);
std::string usage_text();

}  // namespace tidegate::sim
