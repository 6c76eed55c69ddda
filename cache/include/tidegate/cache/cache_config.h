#pragma once
// The `cache:` config section, parsed once into an immutable object (parse_cache_config in
// semantic_cache.h). Every field has a default so `cache: {enabled: true}` is a working cache.
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tidegate/cache/audit.h"
#include "tidegate/cache/calibration.h"
#include "tidegate/encoder/minilm.h"

namespace tidegate::cache {

struct EmbedderConfig {
  // Where minilm runs. kAuto: the GPU encoder when kernels::gpu_available(), else the CPU one;
  // kGpu: asked for explicitly, still falls back to the CPU (with a warning) rather than keep
  // the gateway from starting; kCpu: never touches CUDA. Other embedder types ignore kAuto and
  // reject kGpu at config load.
  enum class Device { kAuto, kCpu, kGpu };
  std::string type = "minilm";  // minilm | openai | hash
  Device device = Device::kAuto;
  // Dense-layer arithmetic of the CPU minilm encoder (the GPU one runs fp16 regardless).
  encoder::MiniLMPrecision precision = encoder::MiniLMPrecision::kAuto;
  std::string model_dir;        // minilm: folder with model.safetensors + vocab.txt
  std::string url;              // openai: base URL, e.g. http://127.0.0.1:8080/v1
  std::string model;            // openai: model name sent in the request
  std::string api_key_env;      // openai: name of the environment variable holding the key
  double timeout_s = 2.0;       // per embed call
  int threads = 1;              // encoder threads (minilm): calls that run at once
  int intra_op_threads = 1;     // minilm: threads one call may use (MiniLMOptions::intra_op_threads)
  int max_batch = 32;           // texts per encoder call
  int dim = 384;                // hash: output dimension
};

struct IndexConfig {
  // kGpuFlat: a scope past flat_max moves to its own CUDA flat index (kernels/) instead of
  // HNSW; without a usable GPU it behaves as kHnsw (see README "GPU path").
  enum class Type { kHnsw, kFlat, kGpuFlat };
  Type type = Type::kHnsw;
  int hnsw_m = 32;
  int ef_construction = 64;
  // 128: recall@1 0.976 against exact search at 1M entries, search p50 0.66 ms on one 2.6 GHz
  // core (bench/RESULTS.md, "Semantic cache latency"); 96 gave 0.954 (0.50 ms), too close to 0.95.
  int ef_search = 128;
  // How HNSW keeps its vectors. fp16 halves memory and the bytes each distance reads (a search
  // over a million vectors waits on memory), at ~1e-4 error in scores; fp32 is exact. Flat
  // indexes are always fp32.
  enum class Storage { kFp16, kFp32 };
  Storage storage = Storage::kFp16;
  // A scope stays on an exact flat index until it holds this many entries; only then is it
  // rebuilt as HNSW (when type is hnsw). Flat search over a few thousand 384-d vectors is
  // already sub-millisecond and exact, and most scopes (per conversation) stay tiny.
  std::size_t flat_max = 4096;
  // HNSW cannot delete: removals are tombstones, and the scope is rebuilt when they exceed
  // this fraction of its vectors.
  double rebuild_fraction = 0.25;
};

struct ContextConfig {
  enum class Mode { kScope, kWindow };
  // kScope: embed the last user message; all earlier turns are hashed into the scope.
  // kWindow: embed the last `turns` messages; earlier ones are ignored (looser, opt-in).
  Mode mode = Mode::kScope;
  int turns = 1;
};

// The pair verifier and the lookup tiers in front of it (issue 19; README "Tiers of a lookup").
// Used by the pools that state a max_false_hit_rate; the others decide on cosine `threshold`.
// The lexical guard's checks (policy.h lexical_guard) that apply. The cosine tier needs all four: a sentence embedding cannot see
// numbers, names, negation or order. The pair verifier reads both texts together and sees word
// order itself, so its tier may drop the order check (which also turns away true paraphrases
// that reorder their words); the set its calibration was measured with is written in
// calibration.csv and the cache applies that set (cache/README.md).
struct GuardChecks {
  bool numbers = true;
  bool names = true;
  bool negation = true;
  bool order = true;
  bool operator==(const GuardChecks&) const = default;
};
// "numbers,names,negation,order" (any subset, in any order; "none" for no check) and back.
std::optional<GuardChecks> parse_guard_checks(std::string_view list);
std::string to_string(const GuardChecks& checks);

struct VerifierConfig {
  // Folder with verifier.safetensors and calibration.csv. Empty: kDefaultVerifierDir in the
  // working directory, then in the source tree. Resolved by the parser.
  std::string dir;
  // Where it runs, as EmbedderConfig::device: kAuto takes the GPU verifier (kernels/, pairs of
  // concurrent lookups batched) when a device answers; kGpu warns when it falls back to the CPU.
  EmbedderConfig::Device device = EmbedderConfig::Device::kAuto;
  encoder::MiniLMPrecision precision = encoder::MiniLMPrecision::kAuto;  // of the CPU verifier
  double timeout_s = 0.05;   // one lookup's verifier call; past it the lookup is a miss
  int intra_op_threads = 1;  // threads one verifier call may use
  std::size_t candidates = 4;  // top-k from the scope's index...
  double floor = 0.8;          // ...with cosine at least this
  double confidence = 0.95;    // of the one-sided bound on the false-hit rate
  // How a candidate's cosine and verifier probability make the score the calibrated threshold
  // applies to (combined_score). Read from calibration.csv, where the evaluator that wrote the
  // scores put the coefficients it fitted; {0, 0, 1} is the verifier's probability alone.
  std::array<double, 3> combine = {0, 0, 1};
  // The guard checks candidates pass before the verifier scores them: the set the calibration
  // scores were measured with ("guards," line of calibration.csv; all four when absent).
  GuardChecks guards;
};

inline constexpr const char* kDefaultVerifierDir = "cache/verifier/model";
inline constexpr const char* kCalibrationFile = "calibration.csv";

// Reads `path` (lines "score,correct"; '#' comments and a header line allowed; an optional line
// "combine,a,b,c" gives the decision score's coefficients, see VerifierConfig::combine). Throws
// std::runtime_error naming the file and line.
// An optional line "guards,<list>" names the guard checks the scores were measured with.
std::vector<CalibrationRow> read_calibration_rows(const std::string& path, std::array<double, 3>* combine = nullptr,
                                                  GuardChecks* guards = nullptr);

// The decision score of a candidate: sigmoid(a + b * cosine + c * logit(verifier probability)).
double combined_score(const std::array<double, 3>& combine, double cosine, double probability);

// Per model pool (keyed by the public model name).
struct ModelCacheConfig {
  std::optional<bool> enabled;
  std::optional<double> threshold;
  // The false-hit rate this pool accepts; set, its lookups go through the verifier and
  // `calibration` holds the threshold on the verifier's probability.
  std::optional<double> max_false_hit_rate;
  std::optional<Calibration> calibration;
  bool shared = false;  // entries are shared across tenants
  std::optional<double> ttl_s;
  std::optional<ContextConfig> context;
};

struct CacheConfig {
  bool enabled = false;
  EmbedderConfig embedder;
  IndexConfig index;
  // Cosine similarity a hit needs. Measured with tidegate-cache-eval on the shared Quora dev set
  // (bench/RESULTS.md): the lowest threshold whose precision with the lexical guard is >= 0.95
  // (0.964, recall 0.030; halves 0.983 / 0.950). Pools that value hits over strictness lower
  // models.X.threshold (0.95: precision 0.90, recall 0.16).
  double threshold = 0.99;
  // Issue 19: the false-hit rate accepted by default (pools without their own). Unset: cosine.
  std::optional<double> max_false_hit_rate;
  std::optional<Calibration> calibration;  // for max_false_hit_rate, computed at load
  VerifierConfig verifier;
  AuditConfig audit;  // online audits of served hits (audit.h)
  // A prompt whose normalised text (whitespace runs collapsed, ends trimmed) equals a cached
  // one of the same scope is a hit without embedding.
  bool exact_tier = true;
  ContextConfig context;
  std::map<std::string, ModelCacheConfig> models;
  double ttl_s = 24 * 3600.0;
  double max_ttl_s = 7 * 24 * 3600.0;  // ceiling for the per-request x-tidegate-cache-ttl
  std::uint64_t max_entries = 100000;
  std::uint64_t max_bytes = 1ull << 30;
  double max_temperature = 1.0;  // requests above this bypass
  bool cache_tool_calls = false;
  bool lexical_guard = true;  // a hit also needs equal numbers and names, same word order (policy.h)
  std::size_t max_prompt_bytes = 4096;  // longer embedded text bypasses (see README)
  std::string data_dir;                 // empty: memory only
  double snapshot_interval_s = 300;
  std::uint64_t snapshot_log_bytes = 64ull << 20;  // snapshot early when the log grows past this
  double lookup_timeout_s = 0.25;
  int workers = 2;
  std::size_t max_queue = 1024;  // pending lookups beyond this bypass ("overloaded")

  double threshold_for(const std::string& model) const;
  // The calibrated verifier threshold of this pool, or null when it decides on cosine.
  const Calibration* calibration_for(const std::string& model) const;
  bool verifier_needed() const;
  bool shared_for(const std::string& model) const;
  double ttl_for(const std::string& model) const;
  bool enabled_for(const std::string& model) const;
  const ContextConfig& context_for(const std::string& model) const;
};

}  // namespace tidegate::cache
