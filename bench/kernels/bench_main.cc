// tidegate_kernels_bench [--cpu-only] [--quick] [--out FILE] [--sizes a,b,c] [--batches a,b]
//   [--hnsw-max N] [--faiss-flat-max N] [--min-time S] [--no-search] [--no-encoder] [--no-verifier] [--model-dir D]
// Writes one JSON document (stdout, or FILE). Without a GPU the GPU parts are reported as skipped.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "bench.h"
#include "tidegate/common/log.h"
#include "tidegate/kernels/gpu.h"

namespace tidegate::kernels::bench {

Timing time_calls(const std::function<void()>& fn, double min_time_s, std::size_t min_iters, std::size_t max_iters) {
  using Clock = std::chrono::steady_clock;
  fn();
  std::vector<double> ms;
  const auto start = Clock::now();
  while (ms.size() < max_iters) {
    const auto t0 = Clock::now();
    fn();
    const auto t1 = Clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (ms.size() >= min_iters && std::chrono::duration<double>(t1 - start).count() >= min_time_s) break;
  }
  Timing t;
  t.iterations = ms.size();
  for (double v : ms) t.total_s += v / 1e3;
  t.mean_ms = t.total_s * 1e3 / static_cast<double>(ms.size());
  std::sort(ms.begin(), ms.end());
  t.p50_ms = ms[ms.size() / 2];
  t.p99_ms = ms[std::min(ms.size() - 1, static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(ms.size()))) - 1)];
  return t;
}

boost::json::object to_json(const Timing& t) {
  return {{"iterations", t.iterations}, {"mean_ms", t.mean_ms}, {"p50_ms", t.p50_ms}, {"p99_ms", t.p99_ms}};
}

void random_unit_vectors(float* out, std::size_t n, std::size_t dim, std::uint64_t seed) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([=] {
      std::mt19937_64 rng(seed * 1000003 + t);
      std::normal_distribution<float> g;
      for (std::size_t r = t; r < n; r += threads) {
        float* v = out + r * dim;
        double s = 0;
        for (std::size_t d = 0; d < dim; ++d) {
          v[d] = g(rng);
          s += static_cast<double>(v[d]) * v[d];
        }
        const float inv = static_cast<float>(1.0 / std::sqrt(s));
        for (std::size_t d = 0; d < dim; ++d) v[d] *= inv;
      }
    });
  }
  for (auto& th : pool) th.join();
}

namespace {

std::vector<std::size_t> parse_list(const std::string& s) {
  std::vector<std::size_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoull(item));
  return out;
}

int run(int argc, char** argv) {
  Options o;
  o.model_dir = std::string(TIDEGATE_SOURCE_ROOT) + "/third_party/models/all-MiniLM-L6-v2";
  std::string out_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument("missing value after " + a);
      return argv[++i];
    };
    if (a == "--cpu-only") o.gpu = false;
    else if (a == "--quick") {  // a smoke run sized for a small CPU-only machine
      o.sizes = {2'000, 20'000};
      o.hnsw_max = 5'000;
      o.min_time_s = 0.2;
      o.encoder_batches = {1, 8};
      o.encoder_tokens = {16};
    } else if (a == "--out") out_path = next();
    else if (a == "--sizes") o.sizes = parse_list(next());
    else if (a == "--batches") o.batches = parse_list(next());
    else if (a == "--hnsw-max") o.hnsw_max = std::stoull(next());
    else if (a == "--faiss-flat-max") o.faiss_flat_max = std::stoull(next());
    else if (a == "--min-time") o.min_time_s = std::stod(next());
    else if (a == "--no-search") o.search = false;
    else if (a == "--no-encoder") o.encoder = false;
    else if (a == "--no-verifier") o.verifier = false;
    else if (a == "--model-dir") o.model_dir = next();
    else throw std::invalid_argument("unknown argument " + a);
  }

  boost::json::object doc;
  doc["date"] = log::iso8601_now();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  doc["host"] = host;
  doc["host_threads"] = std::thread::hardware_concurrency();
  doc["built_with_cuda"] = built_with_cuda();
  const char* plan = std::getenv("TIDEGATE_GPU_SEARCH_PLAN");  // the search kernels' A/B knob
  doc["gpu_search_plan"] = plan != nullptr ? plan : "default";
  double copy_gbps = 0;
  std::string why = "--cpu-only";
  if (o.gpu) {
    if (auto info = describe_device(true, &why)) {
      copy_gbps = info->copy_gbps;
      doc["gpu"] = {{"name", info->name},
                    {"compute_capability", std::to_string(info->compute_major) + "." + std::to_string(info->compute_minor)},
                    {"multiprocessors", info->multiprocessors},
                    {"memory_gib", static_cast<double>(info->memory_bytes) / (1 << 30)},
                    {"d2d_copy_gbps_read_plus_write", info->copy_gbps}};
    } else {
      o.gpu = false;
    }
  }
  if (!o.gpu) {
    o.gpu_skip_reason = why;
    doc["gpu"] = {{"skipped", why}};
    std::cerr << "kernels_bench: GPU parts skipped: " << why << "\n";
  }
  if (o.search) doc["search"] = run_search_bench(o, copy_gbps);
  if (o.encoder) doc["encoder"] = run_encoder_bench(o);
  if (o.verifier) doc["verifier"] = run_verifier_bench(o);

  const std::string text = boost::json::serialize(doc);
  if (out_path.empty()) {
    std::cout << text << "\n";
  } else {
    std::ofstream f(out_path);
    f << text << "\n";
    if (!f) throw std::runtime_error("cannot write " + out_path);
    std::cerr << "kernels_bench: wrote " << out_path << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace tidegate::kernels::bench

int main(int argc, char** argv) {
  try {
    return tidegate::kernels::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "kernels_bench: " << e.what() << "\n";
    return 1;
  }
}
