#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <thread>

#include "tidegate/encoder/minilm.h"
#include "../src/intra_op.h"
#include "../src/minilm_internal.h"
#include "test_support.h"

namespace tidegate::encoder {
namespace {

using Clock = std::chrono::steady_clock;

double cosine(const float* a, const float* b, std::size_t n) {
  double dot = 0, na = 0, nb = 0;
  for (std::size_t i = 0; i < n; ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  return dot / std::sqrt(na * nb);
}

class MiniLM : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (testing::have_model()) model_ = MiniLMModel::load(testing::model_dir());
  }
  static void TearDownTestSuite() {
    model_.reset();
    for (auto& b : reference_batches_) b.clear();
  }
  void SetUp() override {
    if (!model_) GTEST_SKIP() << testing::kNoModel << testing::model_dir();
  }
  static std::vector<std::string> reference_texts() {
    std::vector<std::string> texts;
    const auto ref = testing::reference();  // outlives the loop: the range is a reference into it
    for (const auto& c : ref.at("cases").as_array()) texts.emplace_back(c.at("text").as_string());
    return texts;
  }
  // All reference texts embedded in one call by the default embedder (or one of the given
  // precision); computed once each, because under ASan each pass over the 21 texts takes seconds.
  static const std::vector<float>& reference_batch(MiniLMPrecision precision = MiniLMPrecision::kAuto) {
    auto& batch = reference_batches_[static_cast<int>(precision)];
    if (batch.empty()) {
      MiniLMOptions options;
      options.precision = precision;
      batch = make_minilm_embedder(model_, options)->embed(reference_texts(), Clock::now() + std::chrono::minutes(5));
    }
    return batch;
  }
  static void expect_matches_reference(const std::vector<float>& got, const char* what) {
    const auto ref = testing::reference();
    const auto texts = reference_texts();
    ASSERT_EQ(got.size(), texts.size() * 384);
    const auto& cases = ref.at("cases").as_array();
    double worst = 1.0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      std::vector<float> expected;
      for (const auto& v : cases[i].at("embedding").as_array()) expected.push_back(static_cast<float>(v.as_double()));
      ASSERT_EQ(expected.size(), 384u);
      const double cos = cosine(got.data() + i * 384, expected.data(), 384);
      worst = std::min(worst, cos);
      EXPECT_GE(cos, 0.999) << what << ", text: " << texts[i];
    }
    std::cout << what << ": worst cosine vs sentence-transformers: 1 - " << std::scientific << std::setprecision(2)
              << 1.0 - worst << "\n";
  }
  static inline std::shared_ptr<const MiniLMModel> model_;
  static inline std::vector<float> reference_batches_[3];
};

// The pair verifier pools the [CLS] row only, so its last layer computes that row alone. That
// is a pruning, not an approximation: our own paths (packed fp32, packed bf16 on the dot
// instruction or on matrix tiles, split across threads) must give exactly the values of the whole layer, for sequences of several lengths in
// one batch, both segments in use. The plain path multiplies through OpenBLAS's sgemm, which
// picks its kernel by the row count on some CPUs (seen on a Xeon with AVX-512 FP16 and AMX, not
// on an AMD EPYC), so there the [CLS] row agrees to fp32 rounding only.
TEST_F(MiniLM, FirstTokenPoolingEqualsTheWholeLastLayer) {
  const auto& w = model_->weights();
  std::vector<std::vector<std::int32_t>> ids, types;
  for (const char* text : {"What is the capital of France?", "a", "How can I learn to play the guitar well in a year?",
                           "Why is the sky blue during the day but red at sunset, and what does it say about the air?"}) {
    auto t = model_->tokenizer().tokenize(text, 120);
    t.insert(t.begin(), model_->tokenizer().cls_id());
    t.push_back(model_->tokenizer().sep_id());
    std::vector<std::int32_t> seg(t.size(), 0);
    std::fill(seg.begin() + static_cast<std::ptrdiff_t>(seg.size() / 2), seg.end(), 1);
    ids.push_back(std::move(t));
    types.push_back(std::move(seg));
  }
  IntraOpPool pool(1);
  std::vector<DenseMath> maths = {DenseMath::kFp32};
  if (minilm_bf16_supported()) maths.push_back(DenseMath::kBf16);
  if (minilm_matrix_tiles_supported()) maths.push_back(DenseMath::kBf16Tiles);
  // A tolerance of 0 asks for the same floats.
  const auto check = [](const std::vector<float>& got, const std::vector<float>& want, const char* what,
                        float tolerance = 0.f) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tolerance) << what << ": element " << i;
  };
  {
    const auto whole = bert_forward(w, nullptr, ids, &types, BertPooling::kFirstTokenWholeLayer, nullptr);
    check(bert_forward(w, nullptr, ids, &types, BertPooling::kFirstToken, nullptr), whole, "sgemm", 1e-5f);
  }
  for (const auto math : maths) {
    const auto packed = pack_minilm(w, math);
    const char* what = math == DenseMath::kBf16Tiles ? "packed bf16 on tiles"
                       : math == DenseMath::kBf16 ? "packed bf16" : "packed fp32";
    ASSERT_EQ(packed[0].qkv.math(), math) << what;
    for (IntraOpPool* p : {static_cast<IntraOpPool*>(nullptr), &pool}) {
      const auto whole = bert_forward(w, &packed, ids, &types, BertPooling::kFirstTokenWholeLayer, nullptr, p);
      const auto cls = bert_forward(w, &packed, ids, &types, BertPooling::kFirstToken, nullptr, p);
      check(cls, whole, what);
      // And it is the [CLS] row: not a row of another token, not zeros.
      EXPECT_NE(cls[0], 0.f) << what;
      EXPECT_NE(std::vector<float>(cls.begin(), cls.begin() + 384), std::vector<float>(cls.begin() + 384, cls.begin() + 768));
    }
  }
}

TEST_F(MiniLM, MatchesSentenceTransformersReference) {
  auto embedder = make_minilm_embedder(model_);
  ASSERT_EQ(embedder->dim(), 384u);
  EXPECT_EQ(embedder->name(), "minilm");
  expect_matches_reference(reference_batch(), "default precision");
  expect_matches_reference(reference_batch(MiniLMPrecision::kFp32), "fp32");
}

TEST_F(MiniLM, Bf16StaysCloseToFp32) {
  MiniLMOptions bf16;
  bf16.precision = MiniLMPrecision::kBf16;
  if (!minilm_bf16_supported()) {
    EXPECT_THROW(make_minilm_embedder(model_, bf16), std::invalid_argument);
    GTEST_SKIP() << "this CPU lacks AVX512-BF16: the bf16 path cannot run here";
  }
  const auto& fp32 = reference_batch(MiniLMPrecision::kFp32);
  const auto& low = reference_batch(MiniLMPrecision::kBf16);
  expect_matches_reference(low, "bf16");
  const auto texts = reference_texts();
  double worst = 1.0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const double cos = cosine(fp32.data() + i * 384, low.data() + i * 384, 384);
    worst = std::min(worst, cos);
    EXPECT_GE(cos, 0.9995) << texts[i];
    EXPECT_LT(cos, 1.0 - 1e-9) << "bf16 gave fp32's exact result: is the bf16 path running? " << texts[i];
  }
  std::cout << "bf16 vs fp32: worst cosine 1 - " << std::scientific << std::setprecision(2) << 1.0 - worst << "\n";
}

// On a CPU with AMX the default bf16 runs on tiles; the dot-instruction kernel stays what CPUs
// without tiles run, and what matrix_tiles = false asks for: it must match the reference too.
TEST_F(MiniLM, Bf16OnTheDotInstructionMatchesTheReference) {
  if (!minilm_bf16_supported()) GTEST_SKIP() << "this CPU lacks AVX512-BF16: the bf16 path cannot run here";
  MiniLMOptions dot;
  dot.precision = MiniLMPrecision::kBf16;
  dot.matrix_tiles = false;
  const auto got = make_minilm_embedder(model_, dot)->embed(reference_texts(), Clock::now() + std::chrono::minutes(5));
  expect_matches_reference(got, "bf16 on the dot instruction");
  if (minilm_matrix_tiles_supported()) {
    // Same operands, sums in another order, and each layer's rows rounded to bf16 again: as
    // close as bf16 is to fp32 (1 - cosine ~1e-5 seen), and not the same floats (the tiles ran).
    const auto& tiles = reference_batch(MiniLMPrecision::kBf16);
    double worst = 1.0;
    for (std::size_t i = 0; i < got.size() / 384; ++i)
      worst = std::min(worst, cosine(got.data() + i * 384, tiles.data() + i * 384, 384));
    EXPECT_GE(worst, 0.9995);
    EXPECT_NE(got, tiles) << "the tile and dot kernels gave the same floats: are the tiles running?";
  }
}

TEST_F(MiniLM, BatchingDoesNotChangeAnyRow) {
  auto embedder = make_minilm_embedder(model_);
  const auto texts = reference_texts();
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  const auto& batch = reference_batch();
  for (std::size_t i = 1; i < texts.size(); i += 5) {
    const auto single = embedder->embed({texts[i]}, deadline);
    for (std::size_t d = 0; d < 384; ++d) ASSERT_NEAR(single[d], batch[i * 384 + d], 1e-5) << texts[i];
  }
  EXPECT_TRUE(embedder->embed({}, deadline).empty());
  MiniLMOptions small_passes;
  small_passes.max_pass_tokens = 16;  // the first 6 texts run as several passes
  const std::vector<std::string> head(texts.begin(), texts.begin() + 6);
  const auto split = make_minilm_embedder(model_, small_passes)->embed(head, deadline);
  ASSERT_EQ(split.size(), head.size() * 384);
  for (std::size_t i = 0; i < split.size(); ++i) ASSERT_NEAR(split[i], batch[i], 1e-5) << i;
}

TEST_F(MiniLM, PackedKernelsAgreeWithOpenBlasPath) {
  // minilm_forward uses OpenBLAS sgemm for every dense layer; the embedder uses packed kernels.
  const auto texts = reference_texts();
  std::vector<std::vector<std::int32_t>> ids;
  for (const auto& t : texts) ids.push_back(model_->tokenizer().encode(t, 256));
  const auto blas = minilm_forward(model_->weights(), ids);
  const auto& packed = reference_batch(MiniLMPrecision::kFp32);
  ASSERT_EQ(blas.size(), packed.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    EXPECT_GT(cosine(blas.data() + i * 384, packed.data() + i * 384, 384), 0.99999) << texts[i];
  }
}

TEST_F(MiniLM, IntraOpThreadsGiveTheSameVectors) {
  // Panels are split across threads, each computed exactly as on one thread: equal, not close.
  const auto texts = reference_texts();
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  for (const auto precision : {MiniLMPrecision::kAuto, MiniLMPrecision::kFp32}) {
    MiniLMOptions one, three;
    one.precision = three.precision = precision;
    three.intra_op_threads = 3;
    const auto a = make_minilm_embedder(model_, one)->embed(texts, deadline);
    auto split = make_minilm_embedder(model_, three);
    EXPECT_EQ(split->embed(texts, deadline), a);
    // Callers racing for the helpers: the one that gets them and the ones that run alone agree.
    std::vector<std::vector<float>> results(3);
    std::vector<std::thread> threads;
    const std::vector<std::string> head(texts.begin(), texts.begin() + 4);
    for (std::size_t t = 0; t < results.size(); ++t)
      threads.emplace_back([&, t] { results[t] = split->embed(head, deadline); });
    for (auto& th : threads) th.join();
    for (const auto& r : results) EXPECT_EQ(r, std::vector<float>(a.begin(), a.begin() + 4 * 384));
  }
  MiniLMOptions bad;
  bad.intra_op_threads = 0;
  EXPECT_THROW(make_minilm_embedder(model_, bad), std::invalid_argument);
}

TEST_F(MiniLM, RowsAreUnitLength) {
  auto embedder = make_minilm_embedder(model_);
  const auto v = embedder->embed({"a", std::string(5000, '?'), "\xff\xfe"}, Clock::now() + std::chrono::minutes(1));
  for (std::size_t r = 0; r < 3; ++r) {
    double n = 0;
    for (std::size_t d = 0; d < 384; ++d) n += static_cast<double>(v[r * 384 + d]) * v[r * 384 + d];
    EXPECT_NEAR(n, 1.0, 1e-4);
  }
}

TEST_F(MiniLM, ParaphrasesAreCloserThanUnrelatedSentences) {
  auto embedder = make_minilm_embedder(model_);
  const auto v = embedder->embed({"What is the capital of France?", "Which city is France's capital?",
                                  "How do I bake sourdough bread?"},
                                 Clock::now() + std::chrono::minutes(1));
  EXPECT_GT(cosine(v.data(), v.data() + 384, 384), 0.8);
  EXPECT_LT(cosine(v.data(), v.data() + 768, 384), 0.3);
}

TEST_F(MiniLM, ConcurrentCallsAgree) {
  auto embedder = make_minilm_embedder(model_);
  const std::vector<std::string> texts = {"concurrency in the encoder", "a second sentence, a bit longer than the first"};
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  const auto expected = embedder->embed(texts, deadline);
  std::vector<std::vector<float>> results(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2; ++i) results[t] = embedder->embed(texts, deadline);
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& r : results) EXPECT_EQ(r, expected);
}

TEST_F(MiniLM, PastDeadlineThrows) {
  auto embedder = make_minilm_embedder(model_);
  EXPECT_THROW(embedder->embed({"late"}, Clock::now() - std::chrono::milliseconds(1)), std::runtime_error);
}

TEST_F(MiniLM, MaxSeqLengthOptionTruncates) {
  MiniLMOptions options;
  options.max_seq_length = 8;
  auto short_embedder = make_minilm_embedder(model_, options);
  auto full = make_minilm_embedder(model_);
  const auto deadline = Clock::now() + std::chrono::minutes(1);
  const std::string text = "one two three four five six seven eight nine ten eleven twelve";
  const std::string prefix = "one two three four five six";
  EXPECT_EQ(short_embedder->embed({text}, deadline), full->embed({prefix}, deadline));
}

TEST(MiniLMLoad, MissingFolderSaysHowToFixIt) {
  try {
    MiniLMModel::load("/nonexistent/minilm");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/minilm"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("scripts/setup.sh"), std::string::npos);
  }
}

TEST(MiniLMLoad, CorruptSafetensorsIsReported) {
  const auto dir = std::filesystem::temp_directory_path() / ("minilm_corrupt_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type":"bert","hidden_size":8,"num_attention_heads":2,
      "intermediate_size":16,"num_hidden_layers":1,"vocab_size":4,"max_position_embeddings":16})";
  std::ofstream(dir / "vocab.txt") << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n";
  {
    std::ofstream f(dir / "model.safetensors", std::ios::binary);
    const std::uint64_t len = 1000;  // longer than the file
    f.write(reinterpret_cast<const char*>(&len), 8);
    f << "{}";
  }
  try {
    MiniLMModel::load(dir.string());
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("header length"), std::string::npos) << e.what();
  }
  {
    std::ofstream f(dir / "model.safetensors", std::ios::binary);
    const std::string header = R"({"embeddings.word_embeddings.weight":{"dtype":"F32","shape":[4,8],"data_offsets":[0,128]}})";
    const std::uint64_t len = header.size();
    f.write(reinterpret_cast<const char*>(&len), 8);
    f << header << std::string(128, '\0');
  }
  try {
    MiniLMModel::load(dir.string());
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("position_embeddings.weight' is missing"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tidegate::encoder
