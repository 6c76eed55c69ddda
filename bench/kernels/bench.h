#pragma once
// Shared pieces of the kernels benchmark driver.
#include <boost/json.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace tidegate::kernels::bench {

struct Options {
  bool gpu = true;                   // false: CPU-only run (--cpu-only) or no usable GPU
  std::string gpu_skip_reason;
  std::vector<std::size_t> sizes = {100'000, 1'000'000, 10'000'000};
  std::vector<std::size_t> batches = {1, 64};
  std::size_t dim = 384;
  std::size_t k = 10;
  std::size_t faiss_flat_max = 10'000'000;
  std::size_t hnsw_max = 1'000'000;  // HNSW construction past this takes minutes: bounded
  double min_time_s = 1.0;           // per measured configuration
  bool search = true;
  bool encoder = true;
  bool verifier = true;
  std::vector<std::size_t> encoder_batches = {1, 8, 64};
  std::vector<std::size_t> encoder_tokens = {16, 64};
  std::string model_dir;
};

struct Timing {
  std::size_t iterations = 0;
  double total_s = 0;
  double mean_ms = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};

// Runs fn once to warm up, then until min_time_s has passed (at least min_iters, at most
// max_iters times), recording each call's latency.
Timing time_calls(const std::function<void()>& fn, double min_time_s, std::size_t min_iters = 3,
                  std::size_t max_iters = 100000);
boost::json::object to_json(const Timing& t);

// n unit vectors of dim floats, uniform directions from a fixed seed; threads split the rows.
void random_unit_vectors(float* out, std::size_t n, std::size_t dim, std::uint64_t seed);

boost::json::object run_search_bench(const Options& o, double copy_gbps);
boost::json::object run_encoder_bench(const Options& o);
boost::json::object run_verifier_bench(const Options& o);

#if TIDEGATE_KERNELS_WITH_MINILM
}  // namespace tidegate::kernels::bench
namespace tidegate::encoder {
class WordPieceTokenizer;
}
namespace tidegate::kernels::bench {
// Prompts of exactly `tokens` ids ([CLS] and [SEP] included): words that are single word pieces,
// drawn at random (seeded by `tokens`).
std::vector<std::string> make_prompts(const encoder::WordPieceTokenizer& tok, std::size_t tokens, std::size_t count);
#endif

}  // namespace tidegate::kernels::bench
