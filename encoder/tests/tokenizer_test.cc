#include <gtest/gtest.h>

#include "tidegate/encoder/minilm.h"
#include "test_support.h"

namespace tidegate::encoder {
namespace {

WordPieceTokenizer tiny() {
  return WordPieceTokenizer({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "a", "##b", "cafe", "!",
                             "\xe4\xb8\xad", "hello", "world", "##s"},
                            WordPieceTokenizer::Options{});
}

TEST(Tokenizer, GreedyLongestMatchWithContinuations) {
  auto t = tiny();
  EXPECT_EQ(t.tokenize("unaffable"), (std::vector<std::int32_t>{4, 5, 6}));
  EXPECT_EQ(t.tokenize("worlds"), (std::vector<std::int32_t>{13, 14}));
  // "unaffx" has no piece for "x": the whole word is [UNK], not a partial split.
  EXPECT_EQ(t.tokenize("unaffx hello"), (std::vector<std::int32_t>{1, 12}));
}

TEST(Tokenizer, NormalisesCaseAccentsPunctuationAndCjk) {
  auto t = tiny();
  EXPECT_EQ(t.basic_tokens("Hello, CAFÉ!"), (std::vector<std::string>{"hello", ",", "cafe", "!"}));
  EXPECT_EQ(t.basic_tokens("ab\xe4\xb8\xad" "cd"), (std::vector<std::string>{"ab", "\xe4\xb8\xad", "cd"}));
  EXPECT_EQ(t.basic_tokens("a\tb\nc\xc2\xa0" "d"), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(t.basic_tokens("ǅ\xcc\x81"), (std::vector<std::string>{"ǆ"}));  // combining acute dropped
}

TEST(Tokenizer, DropsInvalidUtf8AndControls) {
  auto t = tiny();
  EXPECT_EQ(t.basic_tokens("hel\xfflo \xc3 world\x07\xed\xa0\x80"), (std::vector<std::string>{"hello", "world"}));
  EXPECT_EQ(t.basic_tokens(std::string("a\0b", 3)), (std::vector<std::string>{"ab"}));
  EXPECT_TRUE(t.tokenize("\xff\xfe\x01").empty());
}

TEST(Tokenizer, KeepsUnassignedButDropsPrivateUse) {
  auto t = tiny();
  // U+0378 is unassigned (kept, as HF does); U+E000 is private use (dropped like a control).
  EXPECT_EQ(t.basic_tokens("a\xcd\xb8" "b c\xee\x80\x80" "d"), (std::vector<std::string>{"a\xcd\xb8" "b", "cd"}));
}

TEST(Tokenizer, OverlongWordIsUnknown) {
  auto t = tiny();
  EXPECT_EQ(t.tokenize(std::string(100, 'a')), (std::vector<std::int32_t>{1}));
  std::string ab = "a";
  for (int i = 0; i < 99; ++i) ab += "b";
  EXPECT_EQ(t.tokenize(ab).size(), 100u);
  EXPECT_EQ(t.tokenize(ab + "b"), (std::vector<std::int32_t>{1}));
}

TEST(Tokenizer, EncodeAddsSpecialsAndTruncatesToAPrefix) {
  auto t = tiny();
  EXPECT_EQ(t.encode("", 8), (std::vector<std::int32_t>{2, 3}));
  EXPECT_EQ(t.encode("hello world hello world", 4), (std::vector<std::int32_t>{2, 12, 13, 3}));
  EXPECT_EQ(t.encode("unaffable", 3), (std::vector<std::int32_t>{2, 4, 3}));
  EXPECT_THROW(t.encode("x", 1), std::invalid_argument);
}

TEST(Tokenizer, RejectsVocabularyWithoutSpecialTokens) {
  EXPECT_THROW(WordPieceTokenizer({"a", "b"}, WordPieceTokenizer::Options{}), std::runtime_error);
  EXPECT_THROW(WordPieceTokenizer::from_vocab_file("/nonexistent/vocab.txt", {}), std::runtime_error);
}

TEST(Tokenizer, ReproducesReferenceTokenIds) {
  if (!testing::have_model()) GTEST_SKIP() << testing::kNoModel << testing::model_dir();
  auto t = WordPieceTokenizer::from_vocab_file(testing::model_dir() + "/vocab.txt", WordPieceTokenizer::Options{});
  const auto ref = testing::reference();
  const auto max_len = static_cast<std::size_t>(ref.at("max_seq_length").as_int64());
  // "cases": the 21 embedding sentences; "token_cases": 400 random multi-script strings.
  std::size_t checked = 0;
  for (const char* key : {"cases", "token_cases"}) {
    for (const auto& c : ref.at(key).as_array()) {
      const auto& text = c.at("text").as_string();
      std::vector<std::int32_t> expected;
      for (const auto& id : c.at("token_ids").as_array()) expected.push_back(static_cast<std::int32_t>(id.as_int64()));
      EXPECT_EQ(t.encode(std::string_view(text.data(), text.size()), max_len), expected) << key << ": " << text;
      ++checked;
    }
  }
  EXPECT_GE(checked, 420u);
}

}  // namespace
}  // namespace tidegate::encoder
