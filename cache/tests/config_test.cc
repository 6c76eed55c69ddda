#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "tidegate/cache/cache_config.h"
#include "tidegate/encoder/minilm.h"
#include "tidegate/cache/semantic_cache.h"
#include "tidegate/common/config_error.h"

using namespace tidegate::cache;
namespace encoder = tidegate::encoder;
namespace fs = std::filesystem;

namespace {

// The files the minilm loader needs, as empty stand-ins: the parser only checks they are there.
void make_model_folder(const fs::path& dir) {
  fs::create_directories(dir);
  for (const char* f : {"config.json", "vocab.txt", "model.safetensors"}) std::ofstream(dir / f) << "";
}

// The parser requires the minilm model folder, so these tests run from a scratch working
// directory holding a stand-in default folder: they never depend on the real weights.
class ScratchDir : public ::testing::Environment {
 public:
  static fs::path root() { return fs::temp_directory_path() / ("tidegate-cache-config-" + std::to_string(::getpid())); }
  void SetUp() override {
    make_model_folder(root() / "work" / encoder::kDefaultMiniLMDir);
    previous_ = fs::current_path();
    fs::current_path(root() / "work");
  }
  void TearDown() override {
    fs::current_path(previous_);
    fs::remove_all(root());
  }

 private:
  fs::path previous_;
};
[[maybe_unused]] const auto* const kScratch = ::testing::AddGlobalTestEnvironment(new ScratchDir);

std::shared_ptr<const CacheConfig> parse(const std::string& yaml, const std::string& base_dir = {}) {
  const auto root = YAML::Load(yaml);
  return parse_cache_config(root["cache"], "cache", base_dir);
}

// `yaml` is refused with a ConfigError naming `key` at `line`, whose text contains `says`.
void expect_refused(const std::string& yaml, const char* key, int line, const char* says = "") {
  try {
    parse(yaml);
    ADD_FAILURE() << "no error for " << yaml;
  } catch (const tidegate::ConfigError& e) {
    EXPECT_EQ(e.key(), key) << yaml << " -> " << e.what();
    EXPECT_EQ(e.line(), line) << yaml << " -> " << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

// The ConfigError's text for `yaml`, or "" when it parses.
std::string error_of(const std::string& yaml, const std::string& base_dir = {}, std::string* key = nullptr,
                     int* line = nullptr) {
  try {
    parse(yaml, base_dir);
  } catch (const tidegate::ConfigError& e) {
    if (key) *key = e.key();
    if (line) *line = e.line();
    return e.what();
  }
  return "";
}

}  // namespace

TEST(CacheConfig, AbsentSectionIsOff) {
  EXPECT_FALSE(parse("other: 1\n")->enabled);
  EXPECT_FALSE(parse("cache: false\n")->enabled);
  EXPECT_TRUE(parse("cache: true\n")->enabled);
}

TEST(CacheConfig, FullSection) {
  const auto models = (ScratchDir::root() / "models" / "minilm").string();
  make_model_folder(models);
  std::string yaml = R"(cache:
  enabled: true
  embedder: {type: minilm, model_dir: @DIR@, timeout: 150ms, threads: 2, max_batch: 16}
  index: {type: hnsw, m: 16, ef_construction: 100, ef_search: 48, flat_max: 1000}
  threshold: 0.9
  context: {mode: window, turns: 3}
  ttl: 2h
  max_entries: 5000
  max_bytes: 64MiB
  max_temperature: 0.7
  cache_tool_calls: true
  data_dir: /var/lib/tidegate/cache
  lookup_timeout: 80ms
  models:
    llama:
      threshold: 0.95
      shared: true
      ttl: 10m
      context: {mode: scope}
    qwen:
      enabled: false
)";
  yaml.replace(yaml.find("@DIR@"), 5, models);
  const auto c = parse(yaml);
  EXPECT_TRUE(c->enabled);
  EXPECT_EQ(c->embedder.type, "minilm");
  EXPECT_EQ(c->embedder.model_dir, models);
  EXPECT_DOUBLE_EQ(c->embedder.timeout_s, 0.15);
  EXPECT_EQ(c->embedder.threads, 2);
  EXPECT_EQ(c->embedder.max_batch, 16);
  EXPECT_EQ(c->index.type, IndexConfig::Type::kHnsw);
  EXPECT_EQ(c->index.hnsw_m, 16);
  EXPECT_EQ(c->index.ef_search, 48);
  EXPECT_EQ(c->index.flat_max, 1000u);
  EXPECT_DOUBLE_EQ(c->threshold, 0.9);
  EXPECT_EQ(c->context.mode, ContextConfig::Mode::kWindow);
  EXPECT_EQ(c->context.turns, 3);
  EXPECT_DOUBLE_EQ(c->ttl_s, 7200);
  EXPECT_EQ(c->max_entries, 5000u);
  EXPECT_EQ(c->max_bytes, 64ull << 20);
  EXPECT_DOUBLE_EQ(c->max_temperature, 0.7);
  EXPECT_TRUE(c->cache_tool_calls);
  EXPECT_EQ(c->data_dir, "/var/lib/tidegate/cache");
  EXPECT_DOUBLE_EQ(c->lookup_timeout_s, 0.08);
  EXPECT_DOUBLE_EQ(c->threshold_for("llama"), 0.95);
  EXPECT_DOUBLE_EQ(c->threshold_for("other"), 0.9);
  EXPECT_TRUE(c->shared_for("llama"));
  EXPECT_FALSE(c->shared_for("other"));
  EXPECT_DOUBLE_EQ(c->ttl_for("llama"), 600);
  EXPECT_EQ(c->context_for("llama").mode, ContextConfig::Mode::kScope);
  EXPECT_EQ(c->context_for("other").mode, ContextConfig::Mode::kWindow);
  EXPECT_FALSE(c->enabled_for("qwen"));
  EXPECT_TRUE(c->enabled_for("llama"));
}

TEST(CacheConfig, ShorthandForms) {
  const auto c = parse("cache:\n  embedder: hash\n  index: flat\n");
  EXPECT_EQ(c->embedder.type, "hash");
  EXPECT_EQ(c->index.type, IndexConfig::Type::kFlat);
}

TEST(CacheConfig, ErrorsNameKeyAndLine) {
  struct Case {
    const char* yaml;
    const char* key;
    int line;
  } cases[] = {
      {"cache:\n  enabled: true\n  treshold: 0.9\n", "cache.treshold", 3},
      {"cache:\n  threshold: 1.5\n", "cache.threshold", 2},
      {"cache:\n  index: {type: ivf}\n", "cache.index.type", 2},
      {"cache:\n  embedder:\n    type: bert\n", "cache.embedder.type", 3},
      {"cache:\n  embedder: {type: openai}\n", "cache.embedder.url", 2},
      {"cache:\n  models:\n    llama:\n      threshold: x\n", "cache.models.llama.threshold", 4},
      {"cache:\n  models:\n    llama:\n      context: {mode: all}\n", "cache.models.llama.context.mode", 4},
      {"cache:\n  ttl: 0\n", "cache.ttl", 2},
      {"cache:\n  max_bytes: 12\n", "cache.max_bytes", 2},
      {"cache:\n  embedder:\n    type: minilm\n    device: tpu\n", "cache.embedder.device", 4},
      {"cache:\n  embedder:\n    type: hash\n    device: gpu\n", "cache.embedder.device", 4},
      {"cache:\n  index:\n    type: gpu-fast\n", "cache.index.type", 3},
      {"cache:\n  index: gpu\n", "cache.index", 2},
      {"cache:\n  embedder:\n    type: minilm\n    precision: int4\n", "cache.embedder.precision", 4},
      {"cache:\n  index:\n    type: hnsw\n    storage: int8\n", "cache.index.storage", 4},
      {"cache:\n  embedder:\n    type: minilm\n    intra_op_threads: 0\n", "cache.embedder.intra_op_threads", 4},
  };
  for (const auto& c : cases) expect_refused(c.yaml, c.key, c.line);
}

TEST(CacheConfig, IndexStorage) {
  EXPECT_EQ(parse("cache: {enabled: true}\n")->index.storage, IndexConfig::Storage::kFp16);
  EXPECT_EQ(parse("cache:\n  index: {type: hnsw, storage: fp32}\n")->index.storage, IndexConfig::Storage::kFp32);
}

TEST(CacheConfig, IntraOpThreads) {
  EXPECT_EQ(parse("cache: {enabled: true}\n")->embedder.intra_op_threads, 1);
  EXPECT_EQ(parse("cache:\n  embedder: {type: minilm, intra_op_threads: 2}\n")->embedder.intra_op_threads, 2);
}

TEST(CacheConfig, EncoderPrecision) {
  EXPECT_EQ(parse("cache: {enabled: true}\n")->embedder.precision, encoder::MiniLMPrecision::kAuto);
  EXPECT_EQ(parse("cache:\n  embedder: {precision: fp32}\n")->embedder.precision, encoder::MiniLMPrecision::kFp32);
  const char* bf16 = "cache:\n  embedder:\n    type: minilm\n    precision: bf16\n";
  if (encoder::minilm_bf16_supported()) {
    EXPECT_EQ(parse(bf16)->embedder.precision, encoder::MiniLMPrecision::kBf16);
  } else {
    try {
      parse(bf16);
      ADD_FAILURE() << "bf16 accepted on a CPU without AVX512-BF16";
    } catch (const tidegate::ConfigError& e) {
      EXPECT_EQ(e.key(), "cache.embedder.precision");
      EXPECT_EQ(e.line(), 4);
    }
  }
}

TEST(CacheConfig, GpuKeys) {
  const auto dflt = parse("cache: {enabled: true}\n");
  EXPECT_EQ(dflt->embedder.device, EmbedderConfig::Device::kAuto);
  EXPECT_EQ(dflt->index.type, IndexConfig::Type::kHnsw);
  const auto gpu = parse("cache:\n  embedder: {type: minilm, device: gpu}\n  index: {type: gpu-flat, flat_max: 0}\n");
  EXPECT_EQ(gpu->embedder.device, EmbedderConfig::Device::kGpu);
  EXPECT_EQ(gpu->index.type, IndexConfig::Type::kGpuFlat);
  EXPECT_EQ(gpu->index.flat_max, 0u);
  EXPECT_EQ(parse("cache:\n  embedder: {device: cpu}\n")->embedder.device, EmbedderConfig::Device::kCpu);
  EXPECT_EQ(parse("cache:\n  index: gpu-flat\n")->index.type, IndexConfig::Type::kGpuFlat);
  // auto is fine for any embedder type (it only ever picks the GPU for minilm).
  EXPECT_EQ(parse("cache:\n  embedder: {type: hash, device: auto}\n")->embedder.device, EmbedderConfig::Device::kAuto);
}

// Issue 17: --check-config passed with a missing model folder, and the gateway then failed at
// start (or, for a relative path, silently loaded the copy in the source checkout).
TEST(CacheConfig, MissingModelFolderIsAnErrorNamingTheKeyAndPath) {
  std::string key;
  int line = 0;
  auto what = error_of("cache:\n  embedder:\n    type: minilm\n    model_dir: /nonexistent/minilm\n", {}, &key, &line);
  EXPECT_EQ(key, "cache.embedder.model_dir") << what;
  EXPECT_EQ(line, 4);
  EXPECT_NE(what.find("/nonexistent/minilm does not exist"), std::string::npos) << what;

  const auto empty = ScratchDir::root() / "empty-model";
  fs::create_directories(empty);
  std::ofstream(empty / "config.json") << "{}";
  what = error_of("cache:\n  embedder: {model_dir: " + empty.string() + "}\n", {}, &key);
  EXPECT_EQ(key, "cache.embedder.model_dir");
  EXPECT_NE(what.find(empty.string() + " has no vocab.txt"), std::string::npos) << what;

  // Nothing is loaded when the cache is off or embeds another way, so nothing is required.
  EXPECT_EQ(error_of("cache:\n  enabled: false\n  embedder: {model_dir: /nonexistent}\n"), "");
  EXPECT_EQ(error_of("cache:\n  embedder: {type: hash, model_dir: /nonexistent}\n"), "");
  // Unset: the default folder (here the working directory's stand-in); the path stays unset.
  EXPECT_EQ(parse("cache: true\n")->embedder.model_dir, "");
}

TEST(CacheConfig, RelativeModelDirIsReadFromTheConfigFilesFolder) {
  const auto etc = ScratchDir::root() / "etc";
  make_model_folder(etc / "models" / "minilm");
  const auto c = parse("cache:\n  embedder: {model_dir: models/minilm}\n", etc.string());
  EXPECT_EQ(c->embedder.model_dir, (etc / "models" / "minilm").string());

  // A folder of that name in the working directory is not used instead.
  make_model_folder(fs::current_path() / "only-here");
  std::string key;
  const auto what = error_of("cache:\n  embedder: {model_dir: only-here}\n", etc.string(), &key);
  EXPECT_EQ(key, "cache.embedder.model_dir");
  EXPECT_NE(what.find((etc / "only-here").string() + " does not exist"), std::string::npos) << what;
  EXPECT_NE(what.find("config file's folder " + etc.string()), std::string::npos) << what;

  // YAML that came from no file: relative to the working directory.
  EXPECT_EQ(parse("cache:\n  embedder: {model_dir: only-here}\n")->embedder.model_dir,
            (fs::current_path() / "only-here").string());
}

namespace {

// A verifier folder whose calibration.csv holds `correct` right rows scored high and `wrong`
// wrong ones scored low, plus `mixed` wrong rows among the high scores.
fs::path make_calibration(const std::string& name, int correct, int wrong, int mixed = 0) {
  const auto dir = ScratchDir::root() / name;
  fs::create_directories(dir);
  std::ofstream f(dir / kCalibrationFile);
  f << "# test\nscore,correct\n";
  for (int i = 0; i < correct; ++i) f << 0.9 + 0.09 * i / correct << ",1\n";
  for (int i = 0; i < mixed; ++i) f << 0.95 + 0.04 * i / std::max(mixed, 1) << ",0\n";
  for (int i = 0; i < wrong; ++i) f << 0.1 + 0.5 * i / wrong << ",0\n";
  return dir;
}

}  // namespace

TEST(CacheConfig, VerifierTiers) {
  const auto dir = make_calibration("calib-ok", 2000, 2000);
  auto c = parse("cache:\n  enabled: true\n  max_false_hit_rate: 0.03\n  exact_tier: false\n"
                 "  verifier: {dir: " + dir.string() + ", candidates: 6, floor: 0.75, timeout: 20ms, "
                 "precision: fp32, intra_op_threads: 2, confidence: 0.9, device: gpu}\n"
                 "  models:\n    strict: {max_false_hit_rate: 0.01}\n    cos: {threshold: 0.95}\n");
  EXPECT_FALSE(c->exact_tier);
  EXPECT_EQ(c->verifier.candidates, 6u);
  EXPECT_DOUBLE_EQ(c->verifier.floor, 0.75);
  EXPECT_DOUBLE_EQ(c->verifier.timeout_s, 0.02);
  EXPECT_EQ(c->verifier.intra_op_threads, 2);
  EXPECT_EQ(c->verifier.precision, encoder::MiniLMPrecision::kFp32);
  EXPECT_EQ(c->verifier.device, EmbedderConfig::Device::kGpu);
  EXPECT_DOUBLE_EQ(c->verifier.confidence, 0.9);
  ASSERT_TRUE(c->verifier_needed());
  ASSERT_NE(c->calibration_for("any"), nullptr);
  EXPECT_TRUE(c->calibration_for("any")->ok);
  EXPECT_LE(c->calibration_for("any")->upper_bound, 0.03);
  ASSERT_NE(c->calibration_for("strict"), nullptr);
  EXPECT_LE(c->calibration_for("strict")->upper_bound, 0.01);
  EXPECT_EQ(c->calibration_for("cos"), nullptr);  // this pool decides on cosine
  // Defaults: no rate, no verifier; the exact tier on.
  auto d = parse("cache:\n  enabled: true\n");
  EXPECT_FALSE(d->verifier_needed());
  EXPECT_TRUE(d->exact_tier);
  EXPECT_EQ(d->calibration_for("any"), nullptr);
  EXPECT_EQ(d->verifier.candidates, 4u);
  EXPECT_DOUBLE_EQ(d->verifier.floor, 0.8);
  EXPECT_EQ(d->verifier.device, EmbedderConfig::Device::kAuto);
}

TEST(CacheConfig, VerifierErrorsNameKeyAndLine) {
  const auto dir = make_calibration("calib-errors", 2000, 2000).string();
  struct Case {
    std::string yaml;
    const char* key;
    int line;
    const char* says;
  } cases[] = {
      {"cache:\n  max_false_hit_rate: 0\n", "cache.max_false_hit_rate", 2, "> 0"},
      {"cache:\n  max_false_hit_rate: 0.7\n", "cache.max_false_hit_rate", 2, ""},
      {"cache:\n  verifier:\n    candidates: 0\n", "cache.verifier.candidates", 3, ""},
      {"cache:\n  verifier:\n    floor: 2\n", "cache.verifier.floor", 3, ""},
      {"cache:\n  verifier:\n    timeout: 0s\n", "cache.verifier.timeout", 3, ""},
      {"cache:\n  verifier:\n    device: tpu\n", "cache.verifier.device", 3, "gpu"},
      {"cache:\n  verifier:\n    layers: 2\n", "cache.verifier.layers", 3, ""},
      {"cache:\n  exact_tier: maybe\n", "cache.exact_tier", 2, ""},
      {"cache:\n  verifier: {dir: " + dir + "}\n  models:\n    m:\n      threshold: 0.9\n      max_false_hit_rate: 0.05\n",
       "cache.models.m.max_false_hit_rate", 6, "not both"},
      // No calibration file where the verifier folder is said to be: the file is named.
      {"cache:\n  max_false_hit_rate: 0.05\n  verifier:\n    dir: /nonexistent/verifier\n", "cache.verifier.dir", 4,
       "/nonexistent/verifier/calibration.csv"},
      // A bound the calibration set cannot support refuses the config.
      {"cache:\n  verifier: {dir: " + dir + "}\n  models:\n    m:\n      max_false_hit_rate: 0.0001\n",
       "cache.models.m.max_false_hit_rate", 5, "calibration"},
  };
  for (const auto& c : cases) expect_refused(c.yaml, c.key, c.line, c.says);
  // Too many wrong rows among the best scores: no threshold meets 1%.
  const auto noisy = make_calibration("calib-noisy", 300, 300, 60).string();
  const auto err = error_of("cache:\n  max_false_hit_rate: 0.01\n  verifier: {dir: " + noisy + "}\n");
  EXPECT_NE(err.find("cannot be met"), std::string::npos) << err;
}

TEST(CacheConfig, CalibrationFileLinesAreChecked) {
  const auto dir = ScratchDir::root() / "calib-bad";
  fs::create_directories(dir);
  std::ofstream(dir / kCalibrationFile) << "score,correct\n0.9,1\n0.8,yes\n";
  try {
    read_calibration_rows((dir / kCalibrationFile).string());
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
}

TEST(CacheConfig, CalibrationFileCarriesTheScoreCombination) {
  const auto dir = make_calibration("calib-combine", 2000, 2000);
  {
    std::ofstream f(dir / kCalibrationFile, std::ios::app);
    f << "combine,-3.5,4.25,0.5\n";
  }
  auto c = parse("cache:\n  max_false_hit_rate: 0.05\n  verifier: {dir: " + dir.string() + "}\n");
  EXPECT_DOUBLE_EQ(c->verifier.combine[0], -3.5);
  EXPECT_DOUBLE_EQ(c->verifier.combine[1], 4.25);
  EXPECT_DOUBLE_EQ(c->verifier.combine[2], 0.5);
  EXPECT_NEAR(combined_score({0, 0, 1}, 0.9, 0.8), 0.8, 1e-9);  // the default: the probability alone
  EXPECT_NEAR(combined_score({-3.5, 4.25, 0.5}, 0.9, 0.5), 1 / (1 + std::exp(3.5 - 4.25 * 0.9)), 1e-9);
  std::ofstream(dir / kCalibrationFile, std::ios::app) << "combine,1,2\n";
  const auto err = error_of("cache:\n  max_false_hit_rate: 0.05\n  verifier: {dir: " + dir.string() + "}\n");
  EXPECT_NE(err.find("expected combine,a,b,c"), std::string::npos) << err;
}

TEST(CacheConfig, CalibrationFileNamesTheGuardChecksItsScoresWereMeasuredWith) {
  const auto dir = make_calibration("calib-guards", 2000, 2000);
  const std::string yaml = "cache:\n  max_false_hit_rate: 0.05\n  verifier: {dir: " + dir.string() + "}\n";
  EXPECT_EQ(parse(yaml)->verifier.guards, GuardChecks{});  // no line: every check, as before the line existed
  std::ofstream(dir / kCalibrationFile, std::ios::app) << "guards,negation,numbers,names\n";
  const auto c = parse(yaml);
  EXPECT_EQ(c->verifier.guards, (GuardChecks{true, true, true, false}));
  EXPECT_EQ(to_string(c->verifier.guards), "numbers,names,negation");
  EXPECT_EQ(parse_guard_checks("none"), (GuardChecks{false, false, false, false}));
  EXPECT_EQ(parse_guard_checks(to_string(GuardChecks{})), GuardChecks{});
  EXPECT_FALSE(parse_guard_checks("numbers,spelling"));
  EXPECT_FALSE(parse_guard_checks(""));
  std::ofstream(dir / kCalibrationFile, std::ios::app) << "guards,order,colour\n";
  const auto err = error_of(yaml);
  EXPECT_NE(err.find("expected guards,"), std::string::npos) << err;
}
