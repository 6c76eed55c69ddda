// The pair verifier's native runtime against the training script's own outputs
// (cache/verifier/model/fixtures.json: pairs, their ids and token types, and the probability
// torch computed with the shipped bf16 weights in fp32).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "tidegate/encoder/pair_verifier.h"
#include "test_support.h"

namespace tidegate::encoder {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// Parity tolerances on the probability: fp32 sums in another order than torch (and GELU's erf
// is a 3e-7 approximation); bf16 rounds the activations before every dense product as well.
constexpr double kFp32Tolerance = 1e-4;
constexpr double kBf16Tolerance = 2e-2;

std::string verifier_dir() {
  if (const char* env = std::getenv("TIDEGATE_VERIFIER_DIR")) return env;
  return std::string(TIDEGATE_SOURCE_ROOT) + "/cache/verifier/model";
}

struct Fixture {
  std::string a, b;
  std::vector<std::int32_t> ids, types;
  double probability = 0;
};

std::vector<Fixture> fixtures() {
  std::ifstream in(verifier_dir() + "/fixtures.json");
  std::stringstream text;
  text << in.rdbuf();
  const auto root = boost::json::parse(text.str()).as_object();
  const auto& pairs = root.at("pairs").as_array();
  const auto& encoded = root.at("encoded").as_array();
  std::vector<Fixture> out;
  for (std::size_t i = 0; i < pairs.size() && i < encoded.size(); ++i) {
    Fixture f;
    f.a = pairs[i].at("a").as_string();
    f.b = pairs[i].at("b").as_string();
    for (const auto& v : encoded[i].at("ids").as_array()) f.ids.push_back(static_cast<std::int32_t>(v.as_int64()));
    for (const auto& v : encoded[i].at("types").as_array()) f.types.push_back(static_cast<std::int32_t>(v.as_int64()));
    f.probability = encoded[i].at("probability").to_number<double>();
    out.push_back(std::move(f));
  }
  return out;
}

class PairVerifierTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (testing::have_model()) model_ = MiniLMModel::load(testing::model_dir());
  }
  static void TearDownTestSuite() { model_.reset(); }
  void SetUp() override {
    if (!model_) GTEST_SKIP() << testing::kNoModel << testing::model_dir();
    if (!fs::exists(verifier_dir() + "/" + PairVerifier::kWeightsFile))
      GTEST_SKIP() << "no trained verifier in " << verifier_dir() << " (cache/verifier/train_verifier.py writes it)";
  }
  static std::unique_ptr<PairVerifier> load(MiniLMPrecision precision, bool matrix_tiles = true) {
    PairVerifierOptions o;
    o.precision = precision;
    o.matrix_tiles = matrix_tiles;
    return PairVerifier::load(verifier_dir(), model_, o);
  }
  void expect_parity(MiniLMPrecision precision, double tolerance, const char* what, bool matrix_tiles = true) {
    auto v = load(precision, matrix_tiles);
    // Tiles only where asked for, the CPU has them, and the arithmetic is bf16.
    EXPECT_EQ(v->matrix_tiles(), matrix_tiles && precision != MiniLMPrecision::kFp32 && minilm_matrix_tiles_supported())
        << what;
    const auto fx = fixtures();
    ASSERT_GE(fx.size(), 8u);
    std::vector<PairTokens> pairs;
    for (const auto& f : fx) pairs.push_back(PairTokens{f.ids, f.types});
    const auto got = v->score(pairs);  // all fixtures in one batch
    double worst = 0;
    for (std::size_t i = 0; i < fx.size(); ++i) {
      worst = std::max(worst, std::abs(got[i] - fx[i].probability));
      EXPECT_NEAR(got[i], fx[i].probability, tolerance) << what << ": " << fx[i].a << " | " << fx[i].b;
    }
    std::cout << what << ": worst |p - torch| over " << fx.size() << " pairs: " << std::scientific
              << std::setprecision(2) << worst << "\n";
  }
  static inline std::shared_ptr<const MiniLMModel> model_;
};

TEST_F(PairVerifierTest, EncodesPairsAsTheTrainingScript) {
  auto v = load(MiniLMPrecision::kFp32);
  for (const auto& f : fixtures()) {
    const auto t = v->encode(f.a, f.b);
    EXPECT_EQ(t.ids, f.ids) << f.a << " | " << f.b;
    EXPECT_EQ(t.types, f.types) << f.a << " | " << f.b;
  }
}

TEST_F(PairVerifierTest, Fp32MatchesTorch) { expect_parity(MiniLMPrecision::kFp32, kFp32Tolerance, "fp32"); }

TEST_F(PairVerifierTest, Bf16StaysCloseToTorch) {
  if (!minilm_bf16_supported()) GTEST_SKIP() << "this CPU lacks AVX512-BF16: the bf16 path cannot run here";
  expect_parity(MiniLMPrecision::kBf16, kBf16Tolerance, minilm_matrix_tiles_supported() ? "bf16 on tiles" : "bf16");
  expect_parity(MiniLMPrecision::kBf16, kBf16Tolerance, "bf16 on the dot instruction", false);
}

TEST_F(PairVerifierTest, BatchedEqualsOneByOne) {
  auto v = load(MiniLMPrecision::kAuto);
  const std::vector<std::string> candidates = {"How do I learn Python quickly?", "What is the capital of France?",
                                               "How can I learn Python fast?", ""};
  const auto batch = v->verify("What is the fastest way to learn Python?", candidates, Clock::now() + std::chrono::minutes(1));
  ASSERT_EQ(batch.size(), candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const auto one = v->verify("What is the fastest way to learn Python?", {candidates[i]}, Clock::now() + std::chrono::minutes(1));
    EXPECT_FLOAT_EQ(one[0], batch[i]) << candidates[i];
    EXPECT_GE(batch[i], 0.f);
    EXPECT_LE(batch[i], 1.f);
  }
  EXPECT_TRUE(v->verify("anything", {}, Clock::now() + std::chrono::minutes(1)).empty());
}

TEST_F(PairVerifierTest, LongPairsAreCutLongestFirst) {
  auto v = load(MiniLMPrecision::kAuto);
  std::string long_a, long_b;
  for (int i = 0; i < 200; ++i) long_a += "alpha ";
  for (int i = 0; i < 30; ++i) long_b += "beta ";
  auto t = v->encode(long_a, long_b);
  ASSERT_EQ(t.ids.size(), v->max_tokens());
  const std::size_t b_pieces = 30, a_pieces = v->max_tokens() - 3 - b_pieces;  // b is shorter: kept whole
  EXPECT_EQ(std::count(t.types.begin(), t.types.end(), 0), static_cast<std::ptrdiff_t>(a_pieces + 2));
  EXPECT_EQ(std::count(t.types.begin(), t.types.end(), 1), static_cast<std::ptrdiff_t>(b_pieces + 1));
  t = v->encode(long_a, long_a);  // tie: both halves, b one shorter when the budget is odd
  const std::size_t budget = v->max_tokens() - 3;
  EXPECT_EQ(std::count(t.types.begin(), t.types.end(), 0), static_cast<std::ptrdiff_t>((budget + 1) / 2 + 2));
  EXPECT_EQ(v->verify(long_a, {long_b}, Clock::now() + std::chrono::minutes(1)).size(), 1u);
}

TEST_F(PairVerifierTest, PastDeadlineThrows) {
  auto v = load(MiniLMPrecision::kAuto);
  EXPECT_THROW(v->verify("a", {"b"}, Clock::now() - std::chrono::seconds(1)), std::runtime_error);
}

// Loading faults name the file.
class PairVerifierLoad : public PairVerifierTest {};

void write_safetensors(const fs::path& path, const std::string& header, std::size_t data_bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const std::uint64_t len = header.size();
  f.write(reinterpret_cast<const char*>(&len), 8);
  f << header << std::string(data_bytes, '\0');
}

TEST_F(PairVerifierLoad, FaultsNameTheFile) {
  const auto dir = fs::temp_directory_path() / ("verifier_faults_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto file = (dir / PairVerifier::kWeightsFile).string();
  auto expect_error = [&](const std::string& needle) {
    try {
      PairVerifier::load(dir.string(), model_);
      ADD_FAILURE() << "no exception, expected " << needle;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("file not found");
  {
    std::ofstream f(file, std::ios::binary);
    const std::uint64_t len = 1000;  // longer than the file
    f.write(reinterpret_cast<const char*>(&len), 8);
    f << "{}";
  }
  expect_error("header length");
  write_safetensors(file, R"({"__metadata__":{"format":"something-else","layers":"1","max_tokens":"64"}})", 0);
  expect_error("metadata format");
  write_safetensors(file, R"({"__metadata__":{"format":"tidegate-pair-verifier-1","layers":"1","max_tokens":"64"},)"
                          R"("embeddings.token_type_embeddings.weight":{"dtype":"BF16","shape":[2,384],"data_offsets":[0,1536]}})",
                    1536);
  expect_error("tensor 'embeddings.LayerNorm.weight' is missing");
  write_safetensors(file, R"({"__metadata__":{"format":"tidegate-pair-verifier-1","layers":"1","max_tokens":"64"},)"
                          R"("embeddings.token_type_embeddings.weight":{"dtype":"BF16","shape":[3,384],"data_offsets":[0,2304]}})",
                    2304);
  expect_error("unexpected shape");
  // A real file cut short.
  {
    std::ifstream in(verifier_dir() + "/" + PairVerifier::kWeightsFile, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  }
  expect_error(file);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tidegate::encoder
