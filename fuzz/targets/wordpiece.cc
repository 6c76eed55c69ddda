// The cache encoder's WordPiece tokenizer (cache/encoder/src/wordpiece.cc + unicode_text.cc: the
// BERT normaliser over ICU, the pre-tokeniser and longest-match word pieces) on arbitrary bytes,
// with a small vocabulary built here, under each of four option sets.
// Checks: ids are inside the vocabulary; tokenize(text, k) is the first k ids of tokenize(text)
// (the encoder relies on truncation keeping a prefix); encode() is [CLS] tokenize(text, m-2)
// [SEP], at most m ids; basic_tokens() gives non-empty, valid UTF-8 words without ASCII
// whitespace; an ASCII word's pieces spell the word back, or the word is [UNK].
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tidegate/encoder/minilm.h"

using tidegate::encoder::WordPieceTokenizer;

namespace {

std::vector<std::string> vocab() {
  std::vector<std::string> v = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (char c = 'a'; c <= 'z'; ++c) {
    v.emplace_back(1, c);
    v.push_back(std::string("##") + c);
  }
  for (char c = '0'; c <= '9'; ++c) v.emplace_back(1, c);
  for (const char* p : {".", ",", "!", "?", "'", "\"", "-", "(", ")", ":", ";", "$", "+", "<", "=", ">", "^",
                        "`", "|", "~", "{", "}", "[", "]"})
    v.emplace_back(p);
  for (const char* w : {"the", "quick", "brown", "fox", "tide", "##gate", "gate", "cache", "##s", "##ing", "##ed",
                        "un", "##able", "hello", "world", "what", "is", "a", "token", "##izer", "中", "文", "##文",
                        "α", "β", "é", "ß", "ı", "i̇", "日本", "##語", "😀", "naïve", "cafe", "##é"})
    v.emplace_back(w);
  return v;
}

const std::vector<WordPieceTokenizer>& tokenizers() {
  static const std::vector<WordPieceTokenizer> t = [] {
    std::vector<WordPieceTokenizer> out;
    out.emplace_back(vocab(), WordPieceTokenizer::Options{});
    out.emplace_back(vocab(), WordPieceTokenizer::Options{false, false, false, 100});
    out.emplace_back(vocab(), WordPieceTokenizer::Options{true, false, true, 8});
    out.emplace_back(vocab(), WordPieceTokenizer::Options{false, true, true, 1});
    return out;
  }();
  return t;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& tok : tokenizers()) {
    const auto ids = tok.tokenize(text);
    for (auto id : ids) FUZZ_CHECK(id >= 0 && static_cast<std::size_t>(id) < tok.vocab_size(), "id outside the vocabulary");
    for (std::size_t k : {std::size_t{1}, std::size_t{2}, std::size_t{7}, ids.size() / 2, ids.size()}) {
      const auto cut = tok.tokenize(text, k);
      FUZZ_CHECK(cut.size() == std::min(k, ids.size()) && std::equal(cut.begin(), cut.end(), ids.begin()),
                 "tokenize(text, k) is not a prefix of tokenize(text)", text);
    }
    for (std::size_t m : {std::size_t{2}, std::size_t{5}, std::size_t{256}}) {
      const auto enc = tok.encode(text, m);
      FUZZ_CHECK(enc.size() <= m && enc.size() >= 2 && enc.front() == tok.cls_id() && enc.back() == tok.sep_id(),
                 "encode() shape", text);
      const auto mid = tok.tokenize(text, m - 2);
      FUZZ_CHECK(std::equal(mid.begin(), mid.end(), enc.begin() + 1, enc.end() - 1), "encode() body", text);
    }
    for (const auto& w : tok.basic_tokens(text)) {
      FUZZ_CHECK(!w.empty() && fuzz::valid_utf8(w), "basic token empty or not UTF-8", w);
      FUZZ_CHECK(w.find_first_of(" \t\n\r") == std::string::npos, "basic token holds whitespace", w);
      if (!is_ascii(w)) continue;
      const auto pieces = tok.tokenize(w);
      if (pieces.size() == 1 && pieces[0] == tok.unk_id()) continue;
      std::string spelled;
      for (std::size_t i = 0; i < pieces.size(); ++i) {
        const auto& t = tok.token(pieces[i]);
        spelled += i > 0 && t.rfind("##", 0) == 0 ? t.substr(2) : t;
      }
      FUZZ_CHECK(spelled == w, "word pieces do not spell the word", w, spelled);
    }
  }
  return 0;
}
